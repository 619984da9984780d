package checkout

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/dropstream/dropstream/internal/script"
)

// MaxCancelByLen bounds the requester recorded with a cancel.
const MaxCancelByLen = 100

// Cancellation answers an operator's cancel of a running attempt.
type Cancellation struct {
	OrderID string `json:"order_id"`
	TrNum   int64  `json:"tr_num"`
	// Status is StatusFailed: every effect applied was undone.
	Status string `json:"status"`
	// Reason is "cancelled by an operator", or the first failure's when the
	// attempt was already compensating.
	Reason string `json:"reason"`
	// RequestedAt and RequestedBy are the first cancel request's.
	RequestedAt time.Time `json:"requested_at"`
	RequestedBy string    `json:"requested_by"`
}

// cancelMarkScript records, once, a cancel request of a running attempt.
// KEYS: saga. ARGV: now ms, requester. Returns {status, reason, cancel ms,
// cancel by}, an empty status without a saga.
var cancelMarkScript = script.New(`
local f = redis.call('HMGET', KEYS[1], 'status', 'reason')
if not f[1] then return {''} end
if f[1] == 'pending' or f[1] == 'compensating' then
  if redis.call('HSETNX', KEYS[1], 'cancel_ms', ARGV[1]) == 1 then
    redis.call('HSET', KEYS[1], 'cancel_by', ARGV[2])
  end
end
local c = redis.call('HMGET', KEYS[1], 'cancel_ms', 'cancel_by')
return {f[1], f[2] or '', c[1] or '', c[2] or ''}`)

// Cancel ends an order's running attempt for operator by: like giveUp, it
// records silent parts "cancelled" and compensates. A repeat answers the
// same Cancellation; after an error, cancelling again resumes it.
// ErrNotFound: no such attempt; ErrConflict: it ended without a cancel.
func (s *Flow) Cancel(ctx context.Context, orderID, by string) (Cancellation, error) {
	if len(by) > MaxCancelByLen {
		by = by[:MaxCancelByLen]
	}
	o, err := s.store.FindOrder(ctx, orderID)
	if err != nil {
		return Cancellation{}, err
	}
	if o.TrNum == 0 {
		return Cancellation{}, fmt.Errorf("%w: order %s has no checkout attempt", ErrNotFound, orderID)
	}
	tr := o.TrNum
	h, _ := s.rdb.HGet(ctx, s.keys.Saga(orderID, tr), "tp").Result()
	ctx, span := s.tracer.Start(remoteContext(ctx, h), "checkout.cancel", trace.WithAttributes(
		attribute.String("checkout.order_id", orderID), attribute.Int64("checkout.tr_num", tr)))
	defer span.End()
	c, err := s.cancel(ctx, orderID, tr, by)
	if err == nil {
		err = s.store.confirm(ctx)
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		return c, err
	}
	s.log.WarnContext(ctx, "checkout: attempt cancelled by an operator", "order_id", orderID, "tr_num", tr,
		"by", c.RequestedBy, "reason", c.Reason)
	return c, nil
}

func (s *Flow) cancel(ctx context.Context, orderID string, tr int64, by string) (Cancellation, error) {
	now := time.Now().UnixMilli()
	res, err := cancelMarkScript.Run(ctx, s.rdb, []string{s.keys.Saga(orderID, tr)}, strconv.FormatInt(now, 10), by).StringSlice()
	if err != nil {
		return Cancellation{}, fmt.Errorf("checkout: cancel attempt %d of order %s: %w", tr, orderID, err)
	}
	if len(res) != 4 {
		return Cancellation{}, fmt.Errorf("%w: attempt %d of order %s is no longer kept", ErrNotFound, tr, orderID)
	}
	status, reason := res[0], res[1]
	out := Cancellation{OrderID: orderID, TrNum: tr, Status: status, Reason: reason, RequestedBy: res[3]}
	if t := msTime(res[2]); t != nil {
		out.RequestedAt = *t
	}
	switch {
	case status == StatusSucceeded:
		return out, fmt.Errorf("%w: attempt %d of order %s succeeded: the order is paid", ErrConflict, tr, orderID)
	case status == StatusFailed && res[2] == "":
		return out, fmt.Errorf("%w: attempt %d of order %s already failed (%s)", ErrConflict, tr, orderID, reason)
	case status == StatusFailed:
		return out, nil
	}
	r, err := s.settle(ctx, orderID, tr, ResultCancelled)
	if err != nil {
		return out, err
	}
	out.Status, out.Reason = r.Status, r.Reason
	if r.Status == StatusSucceeded {
		return out, fmt.Errorf("%w: attempt %d of order %s succeeded before the cancel: the order is paid", ErrConflict, tr, orderID)
	}
	return out, nil
}
