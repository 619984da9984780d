package checkout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// openParts returns a saga's parts without an answer (silent) and those
// with an unconfirmed compensation.
func openParts(h map[string]string) (silent, unconfirmed []string) {
	for _, part := range strings.Split(h["parts"], ",") {
		r, answered := h["r:"+part]
		switch {
		case !answered:
			silent = append(silent, part)
		case (r == "ok" || r == ResultAbandoned || r == ResultCancelled) && h["c:"+part] == "":
			unconfirmed = append(unconfirmed, part)
		}
	}
	return silent, unconfirmed
}

// sagaCommand decodes a part's forward command from the saga hash.
func sagaCommand(h map[string]string, part string) (Command, error) {
	var c Command
	if err := json.Unmarshal([]byte(h["cmd:"+part]), &c); err != nil {
		return Command{}, fmt.Errorf("checkout: saga command of part %s unreadable: %w", part, err)
	}
	return c, nil
}

// giveUp ends attempt tr after Config.Timeout (the contract has no "still
// running"): silent parts become "abandoned" and the call compensates. It
// returns succeeded or failed; after an error the sweeper finishes it.
func (s *Flow) giveUp(ctx context.Context, orderID string, tr int64) (Result, error) {
	ctx, span := s.tracer.Start(ctx, "checkout.give_up", trace.WithAttributes(
		attribute.String("checkout.order_id", orderID), attribute.Int64("checkout.tr_num", tr)))
	defer span.End()
	r, err := s.settle(ctx, orderID, tr, ResultAbandoned)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		s.log.WarnContext(ctx, "checkout: wait expired, attempt not given up: the stages and the sweeper will finish it",
			"order_id", orderID, "tr_num", tr, "error", err)
		return Result{OrderID: orderID, TrNum: tr, Status: StatusPending}, err
	}
	span.SetAttributes(attribute.String("checkout.saga_status", r.Status))
	s.log.WarnContext(ctx, "checkout: wait expired, attempt given up", "order_id", orderID, "tr_num", tr,
		"status", r.Status, "reason", r.Reason, "timeout", s.cfg.Timeout)
	return r, nil
}

// errRaced: an attempt was read between its last answer and its decision.
var errRaced = errors.New("attempt read while it was being decided")

// settle is giveUpAttempt, tried up to four times on errRaced.
func (s *Flow) settle(ctx context.Context, orderID string, tr int64, silentAs string) (r Result, err error) {
	for try := 0; try < 4 && (try == 0 || errors.Is(err, errRaced)); try++ {
		r, err = s.giveUpAttempt(ctx, orderID, tr, silentAs)
	}
	return r, err
}

// giveUpAttempt records attempt tr's silent parts as silentAs and applies
// the compensations: it ends failed, or succeeded if all answered ok first.
func (s *Flow) giveUpAttempt(ctx context.Context, orderID string, tr int64, silentAs string) (Result, error) {
	span := trace.SpanFromContext(ctx)
	h, err := s.rdb.HGetAll(ctx, s.keys.Saga(orderID, tr)).Result()
	if err != nil {
		return Result{}, fmt.Errorf("checkout: give up attempt %d of order %s: %w", tr, orderID, err)
	}
	silent, unconfirmed := openParts(h)
	var reply []string
	switch h["status"] {
	case StatusSucceeded, StatusFailed:
		return Result{OrderID: orderID, TrNum: tr, Status: h["status"], Reason: h["reason"]}, nil
	case StatusPending:
		if len(silent) == 0 {
			// All answered: this read raced the outcome script's decision.
			return Result{}, fmt.Errorf("checkout: attempt %d of order %s: %w", tr, orderID, errRaced)
		}
		recs := make([]outcomeRec, len(silent))
		for i, part := range silent {
			recs[i] = outcomeRec{orderID, tr, h["nonce"], part, false, silentAs}
		}
		span.SetAttributes(attribute.StringSlice("checkout."+silentAs, silent))
		if reply, err = s.recordLast(ctx, recs); err != nil {
			return Result{}, err
		}
		if reply[0] != StatusCompensating {
			return s.final(orderID, tr, reply)
		}
		unconfirmed = nil
		for k := 2; k+1 < len(reply); k += 2 {
			unconfirmed = append(unconfirmed, reply[k])
		}
	case StatusCompensating:
	default:
		return Result{}, fmt.Errorf("checkout: give up attempt %d of order %s: no such attempt", tr, orderID)
	}
	span.SetAttributes(attribute.StringSlice("checkout.compensated", unconfirmed))
	recs, err := s.compensateNow(ctx, orderID, tr, h, unconfirmed)
	if err != nil {
		return Result{}, err
	}
	if reply, err = s.recordLast(ctx, recs); err != nil {
		return Result{}, err
	}
	return s.final(orderID, tr, reply)
}

// compensateNow applies parts' compensations and returns their outcomes.
func (s *Flow) compensateNow(ctx context.Context, orderID string, tr int64, h map[string]string, parts []string) ([]outcomeRec, error) {
	calls, partsOf := map[string][]call{}, map[string][]string{}
	for _, part := range parts {
		c, err := sagaCommand(h, part)
		if err != nil {
			return nil, err
		}
		c = c.Compensation()
		side, effect := "stock", s.stockEffect
		if c.Payment() {
			side, effect = "payment", s.paymentEffect
		}
		cl, err := effect(c)
		if err != nil {
			return nil, err
		}
		calls[side], partsOf[side] = append(calls[side], cl), append(partsOf[side], part)
	}
	var recs []outcomeRec
	for _, side := range []string{"stock", "payment"} {
		results, errs := s.applyEffects(ctx, s.effectHeader(side), calls[side])
		for i, part := range partsOf[side] {
			if errs[i] != nil {
				return nil, fmt.Errorf("checkout: compensate %s of order %s attempt %d: %w", part, orderID, tr, errs[i])
			}
			recs = append(recs, outcomeRec{orderID, tr, h["nonce"], part, true, results[i]})
		}
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("checkout: attempt %d of order %s compensating with nothing to compensate", tr, orderID)
	}
	return recs, nil
}

// recordLast records an attempt's outcomes (at least one) and returns the last reply.
func (s *Flow) recordLast(ctx context.Context, recs []outcomeRec) ([]string, error) {
	replies, errs := s.recordOutcomes(ctx, recs, time.Now().UnixMilli())
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("checkout: record outcome of attempt %d of order %s: %w", recs[0].tr, recs[0].orderID, err)
		}
	}
	return replies[len(replies)-1], nil
}

// final turns an outcome reply {status, new|old, reason} into a Result.
func (s *Flow) final(orderID string, tr int64, reply []string) (Result, error) {
	if len(reply) == 3 && (reply[0] == StatusSucceeded || reply[0] == StatusFailed) {
		return Result{OrderID: orderID, TrNum: tr, Status: reply[0], Reason: reply[2]}, nil
	}
	return Result{}, fmt.Errorf("checkout: attempt %d of order %s not final after giving it up: %v", tr, orderID, reply)
}
