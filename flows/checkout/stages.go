package checkout

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/dropstream/dropstream/internal/script"
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

// send publishes commands in one round trip, keyed by user or first item.
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

// call is one command's part of a batched effect call in partition p.
type call struct {
	keys []string
	args []any
	p    int
}

// stockEffect builds a stock command's effect call (one partition).
func (s *Flow) stockEffect(c Command) (call, error) {
	if len(c.Items) == 0 || len(c.Items) > MaxLines {
		return call{}, stream.Permanentf("checkout: stock command with %d items", len(c.Items))
	}
	p := s.keys.Partition(c.Items[0].ID)
	keys := []string{s.keys.Ledger(p, "stock", c.OrderID, c.TrNum, c.Nonce, false), s.keys.Ledger(p, "stock", c.OrderID, c.TrNum, c.Nonce, true)}
	args := []any{c.Rollback(), len(c.Items)}
	for _, l := range c.Items {
		if !ValidID(l.ID) || s.keys.Partition(l.ID) != p || l.Amount < 1 || l.Amount > MaxAmount {
			return call{}, stream.Permanentf("checkout: stock command item %q amount %d not valid in partition %d", l.ID, l.Amount, p)
		}
		keys = append(keys, s.keys.Item(l.ID))
		args = append(args, l.ID, l.Amount)
	}
	return call{keys, args, p}, nil
}

// paymentEffect builds the effect script part of a payment command.
func (s *Flow) paymentEffect(c Command) (call, error) {
	if !ValidID(c.UserID) || c.Amount < 0 || c.Amount > MaxAmount {
		return call{}, stream.Permanentf("checkout: payment command user %q amount %d not valid", c.UserID, c.Amount)
	}
	p := s.keys.Partition(c.UserID)
	keys := []string{s.keys.Ledger(p, "payment", c.OrderID, c.TrNum, c.Nonce, false), s.keys.Ledger(p, "payment", c.OrderID, c.TrNum, c.Nonce, true),
		s.keys.User(c.UserID)}
	args := []any{c.Rollback(), 1, c.UserID, c.Amount}
	return call{keys, args, p}, nil
}

// effectHeader is the effect script's leading ARGV for a side ("stock" or
// "payment"): ledger ttl, the field changed and the noun of its hashes.
func (s *Flow) effectHeader(side string) []any {
	if side == "payment" {
		return []any{s.cfg.StateTTL.Milliseconds(), "credit", "user"}
	}
	return []any{s.cfg.StateTTL.Milliseconds(), "stock", "item"}
}

// applyEffects runs effectScript per partition in one pipeline: each command's result or error.
func (s *Flow) applyEffects(ctx context.Context, header []any, parts []call) ([]string, []error) {
	return runByPartition(ctx, s, effectScript, "effect", "commands", len(parts), func(i int) int { return parts[i].p },
		func(_ int, members []int) script.Call {
			cl := script.Call{Args: append([]any(nil), header...)}
			for _, i := range members {
				cl.Keys = append(cl.Keys, parts[i].keys...)
				cl.Args = append(cl.Args, parts[i].args...)
			}
			return cl
		}, (*redis.Cmd).StringSlice)
}

// runByPartition runs sc once per partition of members 0..n-1 in one
// pipeline: call builds a partition's call, reply splits its reply per
// member (a short reply's error names name and what). Partitions are
// distinct, so a NOSCRIPT retry's reordering is harmless.
func runByPartition[T any](ctx context.Context, s *Flow, sc *script.Script, name, what string, n int, partition func(int) int,
	call func(p int, members []int) script.Call, reply func(*redis.Cmd) ([]T, error)) ([]T, []error) {
	results := make([]T, n)
	errs := make([]error, n)
	var order []int // partitions, as first seen
	byPart := map[int][]int{}
	for i := range n {
		p := partition(i)
		if _, ok := byPart[p]; !ok {
			order = append(order, p)
		}
		byPart[p] = append(byPart[p], i)
	}
	calls := make([]script.Call, len(order))
	for j, p := range order {
		calls[j] = call(p, byPart[p])
	}
	replies, _ := sc.RunAll(ctx, s.rdb, calls)
	for j, r := range replies {
		members := byPart[order[j]]
		res, err := reply(r)
		if err == nil && len(res) != len(members) {
			err = fmt.Errorf("%s script replied %d results for %d %s", name, len(res), len(members), what)
		}
		for k, i := range members {
			if err != nil {
				errs[i] = err
				continue
			}
			results[i] = res[k]
		}
	}
	return results, errs
}

// outcomeRec is one outcome to record in its attempt's saga.
type outcomeRec struct {
	orderID  string
	tr       int64
	nonce    string
	part     string
	rollback bool
	result   string
}

// recordOutcomes runs outcomeScript per partition in one pipeline: each reply or error.
func (s *Flow) recordOutcomes(ctx context.Context, recs []outcomeRec, nowMs int64) ([][]string, []error) {
	out, errs := runByPartition(ctx, s, outcomeScript, "outcome", "outcomes", len(recs), func(i int) int { return s.keys.Partition(recs[i].orderID) },
		func(p int, members []int) script.Call {
			cl := script.Call{Keys: []string{s.topics.Sagas.Stream(p), s.keys.Open(p)}, Args: []any{nowMs, s.cfg.StateTTL.Milliseconds(), DoneChannel}}
			for _, i := range members {
				r := recs[i]
				cl.Keys = append(cl.Keys, s.keys.Order(r.orderID), s.keys.Saga(r.orderID, r.tr))
				cl.Args = append(cl.Args, r.orderID, r.tr, r.nonce, r.part, r.rollback, r.result)
			}
			return cl
		}, (*redis.Cmd).Slice)
	strs := make([][]string, len(recs))
	for i, x := range out {
		if errs[i] != nil {
			continue
		}
		items, _ := x.([]any)
		strs[i] = make([]string, len(items))
		for n, it := range items {
			strs[i][n], _ = it.(string)
		}
		if len(items) == 0 {
			errs[i] = fmt.Errorf("outcome script replied %v", x)
		}
	}
	return strs, errs
}
