package checkout

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/dropstream/dropstream/stream"
)

// Stage names, also their consumer groups.
const (
	StageStock   = "checkout-stock"
	StagePayment = "checkout-payment"
	StageHistory = "checkout-analytics" // appends the saga records to ClickHouse (HistoryConfig).
)

// instrumentationScope names the tracer of this package.
const instrumentationScope = "github.com/dropstream/dropstream/flows/checkout"

// Stages returns the stock and payment stages: a batch's effects, outcomes
// and compensations go in one pipeline each, each command in its own span.
func (s *Flow) Stages() []stream.Stage {
	return []stream.Stage{
		{Name: StageStock, Topic: s.topics.Stock, BatchHandler: s.effectBatch("stock", s.stockEffect, CmdSubtract, CmdAdd), Config: s.cfg.SagaStage()},
		{Name: StagePayment, Topic: s.topics.Payment, BatchHandler: s.effectBatch("payment", s.paymentEffect, CmdPay, CmdCancel), Config: s.cfg.SagaStage()},
	}
}

func decodeCommand(m *stream.Message, types ...string) (Command, error) {
	if m.Type != TypeCommand {
		return Command{}, stream.Permanentf("checkout: message type %q, want %q", m.Type, TypeCommand)
	}
	var c Command
	if err := json.Unmarshal(m.Payload, &c); err != nil {
		return Command{}, stream.Permanentf("checkout: decode command: %w", err)
	}
	if !slices.Contains(types, c.Type) || !ValidID(c.OrderID) || c.TrNum < 1 {
		return Command{}, stream.Permanentf("checkout: command %q of order %q attempt %d not for this stage", c.Type, c.OrderID, c.TrNum)
	}
	return c, nil
}

// effectBatch applies a batch's effects (commands of types, built into
// calls by effect), records every result in its saga and sends the
// compensations it starts; a Redis error is retryable.
func (s *Flow) effectBatch(side string, effect func(Command) (call, error), types ...string) stream.BatchHandler {
	spanName := "checkout." + side
	header := s.effectHeader(side)
	return func(ctx context.Context, msgs []*stream.Message) error {
		errs := make([]error, len(msgs))
		cmds := make([]Command, len(msgs))
		spans := make([]trace.Span, len(msgs))
		parts := make([]call, 0, len(msgs))
		idx := make([]int, 0, len(msgs))
		for i, m := range msgs {
			c, err := decodeCommand(m, types...)
			var cl call
			if err == nil {
				cl, err = effect(c)
			}
			if err != nil {
				errs[i] = err
				continue
			}
			cmds[i] = c
			_, spans[i] = s.tracer.Start(m.Context(), spanName, trace.WithAttributes(
				attribute.String("checkout.order_id", c.OrderID), attribute.Int64("checkout.tr_num", c.TrNum),
				attribute.String("checkout.part", c.Part), attribute.String("checkout.command", c.Type)))
			parts = append(parts, cl)
			idx = append(idx, i)
		}
		results, rerrs := s.applyEffects(ctx, header, parts)
		recs := make([]outcomeRec, 0, len(idx))
		applied := make([]int, 0, len(idx))
		for j, i := range idx {
			c := cmds[i]
			if err := rerrs[j]; err != nil {
				errs[i] = fmt.Errorf("checkout: apply %s of order %s attempt %d: %w", c.Type, c.OrderID, c.TrNum, err)
				spans[i].SetStatus(codes.Error, err.Error())
				spans[i].End()
				continue
			}
			spans[i].SetAttributes(attribute.String("checkout.result", results[j]))
			recs = append(recs, outcomeRec{c.OrderID, c.TrNum, c.Nonce, c.Part, c.Rollback(), results[j]})
			applied = append(applied, i)
		}
		replies, oerrs := s.recordOutcomes(ctx, recs, time.Now().UnixMilli())
		var sends []send
		for j, i := range applied {
			c, span := cmds[i], spans[i]
			if err := oerrs[j]; err != nil {
				errs[i] = fmt.Errorf("checkout: record %s of order %s attempt %d: %w", c.Type, c.OrderID, c.TrNum, err)
				// The script may have run (a reply lost to a timeout): the
				// retry within this delivery must send what it decided.
				msgs[i].Metadata = withRetry(msgs[i].Metadata)
				span.SetStatus(codes.Error, err.Error())
				span.End()
				continue
			}
			res := replies[j]
			span.SetAttributes(attribute.String("checkout.saga_status", res[0]))
			switch res[0] {
			case StatusCompensating:
				// Compensations go out when compensation starts, and again
				// on every repeat (the first sending may have failed).
				if res[1] != "new" && !again(msgs[i]) {
					break
				}
				comps, err := compensations(res)
				if err != nil {
					errs[i] = stream.Permanentf("checkout: %w", err)
					break
				}
				sctx := trace.ContextWithSpan(msgs[i].Context(), span)
				for _, cm := range comps {
					sends = append(sends, send{cm, sctx, i})
				}
			case "unknown":
				s.log.WarnContext(msgs[i].Context(), "checkout: answer to an unknown attempt", "order_id", c.OrderID, "tr_num", c.TrNum, "part", c.Part)
			case "stale":
				// A command of an attempt a failover lost: undo what it
				// applied here (its own ledger keys make this idempotent).
				if c.Rollback() || results[j] != "ok" {
					break
				}
				s.log.WarnContext(msgs[i].Context(), "checkout: effect of an attempt a failover lost, undone",
					"order_id", c.OrderID, "tr_num", c.TrNum, "part", c.Part)
				sends = append(sends, send{c.Compensation(), trace.ContextWithSpan(msgs[i].Context(), span), i})
			}
			span.End()
		}
		if err := s.send(ctx, sends); err != nil {
			for _, sd := range sends {
				errs[sd.msg] = err
				// Mark it so the retry sends what this call could not.
				msgs[sd.msg].Metadata = withRetry(msgs[sd.msg].Metadata)
			}
		}
		return &stream.BatchError{Errs: errs}
	}
}

// compensations decodes an outcome reply's compensations.
func compensations(res []string) ([]Command, error) {
	var out []Command
	for k := 3; k < len(res); k += 2 {
		var c Command
		if err := json.Unmarshal([]byte(res[k]), &c); err != nil {
			return nil, fmt.Errorf("saga command of %s: %w", res[k-1], err)
		}
		out = append(out, c.Compensation())
	}
	return out, nil
}

// send is a command to publish, its context and its cause's index.
type send struct {
	cmd Command
	ctx context.Context
	msg int
}

// send publishes commands in one round trip, each keyed into its keys'
// partition (user, or first item).
func (s *Flow) send(ctx context.Context, sends []send) error {
	var stock, pay []*stream.Message
	for _, sd := range sends {
		c := sd.cmd
		body, _ := json.Marshal(c)
		key, pay1 := c.UserID, c.Payment()
		if !pay1 {
			if len(c.Items) == 0 {
				continue // a begin without items cannot be built by Commands
			}
			key = c.Items[0].ID
		}
		msg := stream.NewMessage(key, TypeCommand, body)
		msg.SetContext(sd.ctx)
		if pay1 {
			pay = append(pay, msg)
		} else {
			stock = append(stock, msg)
		}
	}
	return s.pub.PublishAll(ctx, stream.Batch{Topic: s.topics.Stock, Messages: stock}, stream.Batch{Topic: s.topics.Payment, Messages: pay})
}

// metaResend marks a message whose earlier try may have recorded it
// without sending what it causes.
const metaResend = "checkout-resend"

func withRetry(md map[string]string) map[string]string {
	if md == nil {
		md = map[string]string{}
	}
	md[metaResend] = "1"
	return md
}

// again reports whether a message was handled before.
func again(m *stream.Message) bool { return m.Attempt > 1 || m.Metadata[metaResend] == "1" }

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
