package checkout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/dropstream/dropstream/internal/script"
	"github.com/dropstream/dropstream/stream"
)

// ErrPending: the checkout's outcome is not known: ctx ended, or Redis
// failed while giving the attempt up (the error then wraps Redis's). The
// attempt still completes or is compensated; checking out again answers it.
var ErrPending = errors.New("checkout outcome not known yet")

// Result is the outcome of one checkout attempt.
type Result struct {
	OrderID     string
	TrNum       int64  // the attempt number
	Status      string // StatusSucceeded, StatusFailed, or StatusPending with ErrPending
	Reason      string // why the attempt failed
	AlreadyPaid bool   // the order was paid before this call, nothing charged
}

// beginRetries bounds retries when the order changes before begin.
const beginRetries = 8

// Checkout starts an attempt for the order (or joins the running one) and
// waits up to Config.Timeout for its outcome: the result of a succeeded
// attempt or a paid order, ErrCheckoutFailed once a failed attempt is
// compensated, ErrNotFound, or ErrPending. An attempt running at the
// deadline is given up; an unreachable Redis is retried for Config.RetryFor more.
func (s *Flow) Checkout(ctx context.Context, orderID string) (Result, error) {
	deadline := time.Now().Add(s.cfg.Timeout)
	r, err := stream.RetryUnavailable(ctx, s.cfg.Timeout+s.cfg.RetryFor, func() (Result, error) {
		return s.checkout(ctx, orderID, deadline)
	})
	if err == nil || errors.Is(err, ErrCheckoutFailed) {
		if werr := s.store.confirm(ctx); werr != nil {
			return r, fmt.Errorf("checkout: order %s: outcome %s not on the replicas: %w", orderID, r.Status, werr)
		}
	}
	return r, err
}

// checkout is one try of Checkout, whose wait ends at deadline.
func (s *Flow) checkout(ctx context.Context, orderID string, deadline time.Time) (Result, error) {
	tp := traceparent(ctx)
	for range beginRetries {
		o, err := s.store.findOrder(ctx, orderID)
		if err != nil {
			return Result{}, err
		}
		if o.Paid {
			return Result{OrderID: orderID, TrNum: o.TrNum, Status: StatusSucceeded, AlreadyPaid: true}, nil
		}
		if o.Status == StatusPending || o.Status == StatusCompensating {
			return s.join(ctx, orderID, o.TrNum, deadline)
		}
		c, done := s.waiter.register(s.keys, orderID, o.TrNum+1, s.cfg.Recheck)
		status, tr, err := s.beginAndSend(ctx, o, tp)
		if err == nil && status == "started" {
			r, err := s.waiter.await(ctx, s.keys, orderID, tr, c, false, time.Until(deadline))
			done()
			return s.result(ctx, r, err)
		}
		done()
		switch {
		case err != nil:
			return Result{}, err
		case status == "inflight":
			return s.join(ctx, orderID, tr, deadline)
		case status == "paid":
			return Result{OrderID: orderID, TrNum: tr, Status: StatusSucceeded, AlreadyPaid: true}, nil
		case status == "missing":
			return Result{}, fmt.Errorf("%w: order %s", ErrNotFound, orderID)
		}
	}
	return Result{}, fmt.Errorf("checkout: order %s kept changing during %d tries", orderID, beginRetries)
}

// Commands returns attempt tr's forward commands: one stock command per
// partition of o's items (repeats summed) and one payment command.
func (s *Flow) Commands(o Order, tr int64) ([]Command, error) {
	perItem := map[string]int64{}
	for _, l := range o.Lines {
		perItem[l.ID] += l.Amount
	}
	byPart := map[int][]Line{}
	for _, id := range slices.Sorted(maps.Keys(perItem)) {
		p := s.keys.Partition(id)
		byPart[p] = append(byPart[p], Line{ID: id, Amount: perItem[id]})
	}
	parts := slices.Sorted(maps.Keys(byPart))
	cmds := make([]Command, 0, len(parts)+1)
	for _, p := range parts {
		cmds = append(cmds, Command{OrderID: o.ID, TrNum: tr, Type: CmdSubtract, Part: "stock." + strconv.Itoa(p), Items: byPart[p]})
	}
	if !ValidID(o.UserID) {
		return nil, fmt.Errorf("%w: order %s has user %q", ErrInvalid, o.ID, o.UserID)
	}
	return append(cmds, Command{OrderID: o.ID, TrNum: tr, Type: CmdPay, Part: "pay", UserID: o.UserID, Amount: o.TotalCost}), nil
}

// beginAndSend begins o's next attempt and sends its commands under a
// "checkout.begin" span; unsent ones are resent later.
func (s *Flow) beginAndSend(ctx context.Context, o Order, tp string) (string, int64, error) {
	ctx, span := s.tracer.Start(ctx, "checkout.begin", trace.WithAttributes(attribute.String("checkout.order_id", o.ID)))
	defer span.End()
	status, tr, cmds, err := s.begin(ctx, o, tp)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		return status, tr, err
	}
	span.SetAttributes(attribute.Int64("checkout.tr_num", tr), attribute.String("checkout.begin", status))
	if status != "started" {
		return status, tr, nil
	}
	span.SetAttributes(attribute.Int("checkout.commands", len(cmds)))
	if err := s.dispatch(ctx, cmds); err != nil {
		span.SetStatus(codes.Error, err.Error())
		return status, tr, fmt.Errorf("checkout: attempt %d of order %s begun, its commands not sent (checking out again sends them): %w", tr, o.ID, err)
	}
	return status, tr, nil
}

// begin runs the begin script for o's next attempt, with its commands.
func (s *Flow) begin(ctx context.Context, o Order, tp string) (string, int64, []Command, error) {
	tr := o.TrNum + 1
	cmds, err := s.Commands(o, tr)
	if err != nil {
		return "", 0, nil, err
	}
	nonce := newNonce()
	parts := make([]string, len(cmds))
	var pairs []any
	for i := range cmds {
		cmds[i].Nonce = nonce
		raw, _ := json.Marshal(cmds[i]) // a Command always encodes
		parts[i] = cmds[i].Part
		pairs = append(pairs, parts[i], raw)
	}
	args := append([]any{o.ID, o.TrNum, o.Ver, tr, tp, time.Now().UnixMilli(), strings.Join(parts, ","),
		s.cfg.StateTTL.Milliseconds(), o.UserID, o.TotalCost, nonce}, pairs...)
	keys := []string{s.keys.Order(o.ID), s.keys.Saga(o.ID, tr), s.keys.Open(s.keys.Partition(o.ID))}
	res, err := beginScript.Run(ctx, s.rdb, keys, args...).StringSlice()
	if err != nil {
		return "", 0, nil, fmt.Errorf("checkout: begin attempt %d of order %s: %w", tr, o.ID, err)
	}
	if len(res) != 2 {
		return "", 0, nil, fmt.Errorf("checkout: begin script replied %v", res)
	}
	n, _ := strconv.ParseInt(res[1], 10, 64)
	return res[0], n, cmds, nil
}

// newNonce returns 64 random bits: a failover that loses an attempt cannot
// hand its number and nonce to the next one.
func newNonce() string { return strconv.FormatUint(rand.Uint64(), 36) }

// dispatch sends an attempt's forward commands in ctx's trace.
func (s *Flow) dispatch(ctx context.Context, cmds []Command) error {
	ctx = context.WithoutCancel(ctx)
	sends := make([]send, len(cmds))
	for i, c := range cmds {
		sends[i] = send{cmd: c, ctx: ctx}
	}
	return s.send(ctx, sends)
}

// join waits until deadline for attempt tr begun elsewhere, first
// resending its silent parts' commands in case that caller died.
func (s *Flow) join(ctx context.Context, orderID string, tr int64, deadline time.Time) (Result, error) {
	if err := s.resendSilent(ctx, orderID, tr); err != nil {
		if stream.IsUnavailable(err) {
			return Result{}, fmt.Errorf("checkout: resend the commands of attempt %d of order %s: %w", tr, orderID, err)
		}
		s.log.WarnContext(ctx, "checkout: commands of a joined attempt not sent again", "order_id", orderID, "tr_num", tr, "error", err)
	}
	c, done := s.waiter.register(s.keys, orderID, tr, s.cfg.Recheck)
	defer done()
	r, err := s.waiter.await(ctx, s.keys, orderID, tr, c, true, time.Until(deadline))
	return s.result(ctx, r, err)
}

// resendSilent resends a pending attempt's silent parts' commands.
func (s *Flow) resendSilent(ctx context.Context, orderID string, tr int64) error {
	h, err := s.rdb.HGetAll(ctx, s.keys.Saga(orderID, tr)).Result()
	if err != nil {
		return err
	}
	if h["status"] != StatusPending {
		return nil
	}
	silent, _ := openParts(h)
	cmds := make([]Command, 0, len(silent))
	for _, part := range silent {
		c, err := sagaCommand(h, part)
		if err != nil {
			return err
		}
		cmds = append(cmds, c)
	}
	return s.dispatch(ctx, cmds)
}

// result turns a waiter's answer into Checkout's, giving up on timeout.
func (s *Flow) result(ctx context.Context, r Result, err error) (Result, error) {
	if err != nil {
		return r, fmt.Errorf("%w: attempt %d of order %s: %w", ErrPending, r.TrNum, r.OrderID, err)
	}
	if r.Status == StatusPending {
		if r, err = s.giveUp(ctx, r.OrderID, r.TrNum); err != nil {
			return r, fmt.Errorf("%w: attempt %d of order %s not given up: %w", ErrPending, r.TrNum, r.OrderID, err)
		}
	}
	switch r.Status {
	case StatusSucceeded:
		return r, nil
	case StatusFailed:
		return r, fmt.Errorf("%w: %s", ErrCheckoutFailed, r.Reason)
	}
	return r, fmt.Errorf("%w: attempt %d of order %s", ErrPending, r.TrNum, r.OrderID)
}

// traceparent is the W3C traceparent of ctx's span, or "".
func traceparent(ctx context.Context) string {
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"]
}

// MaxCancelByLen bounds the requester recorded with a cancel.
const MaxCancelByLen = 100

// Cancellation answers an operator's cancel of a running attempt.
type Cancellation struct {
	OrderID string `json:"order_id"`
	TrNum   int64  `json:"tr_num"`
	Status  string `json:"status"` // StatusFailed: every effect applied was undone
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
	by = by[:min(len(by), MaxCancelByLen)]
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
