package checkout

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/dropstream/dropstream/internal/tick"
)

// sweepPage bounds the stale attempts one sweep takes per partition.
const sweepPage = 500

// SweepStats counts what one sweep did.
type SweepStats struct {
	Stale     int // open attempts older than Config.SweepAge
	Resent    int // commands and compensations sent again
	Abandoned int // parts given up after Config.AbandonAge
	Closed    int // index entries of finished or expired attempts dropped
}

// Sweep drives every attempt open longer than Config.SweepAge towards a
// final status: a pending attempt gets its silent parts' commands again, or
// past Config.AbandonAge has them recorded "abandoned" and compensates; a
// compensating one gets its unconfirmed compensations again. A resent
// attempt waits another SweepAge. Concurrent sweeps are harmless.
func (s *Flow) Sweep(ctx context.Context, now time.Time) (SweepStats, error) {
	var st SweepStats
	cutoff := strconv.FormatInt(now.Add(-s.cfg.SweepAge).UnixMilli(), 10)
	pipe := s.rdb.Pipeline()
	ranges := make([]*redis.StringSliceCmd, s.cfg.Partitions)
	for p := range s.cfg.Partitions {
		ranges[p] = pipe.ZRangeByScore(ctx, s.keys.Open(p), &redis.ZRangeBy{Min: "-inf", Max: cutoff, Count: sweepPage})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return st, fmt.Errorf("checkout: sweep: list open attempts: %w", err)
	}
	type attempt struct {
		order string
		tr    int64
		p     int
		saga  *redis.MapStringStringCmd
	}
	var open []attempt
	pipe = s.rdb.Pipeline()
	for p, r := range ranges {
		for _, m := range r.Val() {
			order, trs, _ := strings.Cut(m, "|")
			tr, err := strconv.ParseInt(trs, 10, 64)
			if err != nil || !ValidID(order) {
				pipe.ZRem(ctx, s.keys.Open(p), m)
				st.Closed++
				continue
			}
			open = append(open, attempt{order, tr, p, pipe.HGetAll(ctx, s.keys.Saga(order, tr))})
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return st, fmt.Errorf("checkout: sweep: read sagas: %w", err)
	}
	st.Stale = len(open)
	nowMs := now.UnixMilli()
	var sends []send
	var recs []outcomeRec
	var callCtx []context.Context
	pipe = s.rdb.Pipeline()
	for _, a := range open {
		h := a.saga.Val()
		member := a.order + "|" + strconv.FormatInt(a.tr, 10)
		status := h["status"]
		if status != StatusPending && status != StatusCompensating {
			pipe.ZRem(ctx, s.keys.Open(a.p), member)
			st.Closed++
			continue
		}
		started, _ := strconv.ParseInt(h["started_ms"], 10, 64)
		abandon := status == StatusPending && nowMs-started >= s.cfg.AbandonAge.Milliseconds()
		sctx, span := s.tracer.Start(remoteContext(ctx, h["tp"]), "checkout.sweep", trace.WithAttributes(
			attribute.String("checkout.order_id", a.order), attribute.Int64("checkout.tr_num", a.tr),
			attribute.String("checkout.saga_status", status), attribute.Bool("checkout.abandon", abandon)))
		span.End()
		silent, unconfirmed := openParts(h)
		if abandon {
			for _, part := range silent {
				recs = append(recs, outcomeRec{a.order, a.tr, h["nonce"], part, false, ResultAbandoned})
				callCtx = append(callCtx, sctx)
				st.Abandoned++
			}
		} else {
			resend := silent
			if status == StatusCompensating {
				resend = unconfirmed
			}
			for _, part := range resend {
				c, err := sagaCommand(h, part)
				if err != nil {
					s.log.ErrorContext(sctx, "checkout: sweep", "order_id", a.order, "tr_num", a.tr, "error", err)
					continue
				}
				if status == StatusCompensating {
					c = c.Compensation()
				}
				sends = append(sends, send{c, sctx, 0})
			}
		}
		// Not again before another SweepAge; XX keeps finished ones out.
		pipe.ZAddXX(ctx, s.keys.Open(a.p), redis.Z{Score: float64(nowMs), Member: member})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return st, fmt.Errorf("checkout: sweep: update open attempts: %w", err)
	}
	replies, rerrs := s.recordOutcomes(ctx, recs, nowMs)
	for j, res := range replies {
		if err := rerrs[j]; err != nil {
			return st, fmt.Errorf("checkout: sweep: abandon: %w", err)
		}
		if len(res) > 1 && res[0] == StatusCompensating && res[1] == "new" {
			comps, err := compensations(res)
			if err != nil {
				return st, fmt.Errorf("checkout: sweep: %w", err)
			}
			for _, c := range comps {
				sends = append(sends, send{c, callCtx[j], 0})
			}
		}
	}
	st.Resent = len(sends)
	if len(sends) > 0 || st.Abandoned > 0 {
		s.log.WarnContext(ctx, "checkout: swept stale attempts", "stale", st.Stale, "resent", st.Resent, "abandoned", st.Abandoned)
	}
	if err := s.send(ctx, sends); err != nil {
		return st, fmt.Errorf("checkout: sweep: %w", err)
	}
	return st, nil
}

// RunSweeper runs Sweep every SweepInterval and CheckConservation every
// ConservationInterval, logging failures, until ctx ends (then nil).
func (s *Flow) RunSweeper(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() {
		tick.Every(ctx, s.cfg.ConservationInterval, func() {
			if _, err := s.CheckConservation(ctx); err != nil && ctx.Err() == nil {
				s.log.WarnContext(ctx, "checkout: conservation check failed", "error", err)
			}
		})
	})
	tick.EveryAfter(ctx, s.cfg.SweepInterval, func() {
		if _, err := s.Sweep(ctx, time.Now()); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "checkout: sweep failed", "error", err)
		}
	})
	wg.Wait()
	return nil
}

// remoteContext returns ctx in traceparent tp's trace.
func remoteContext(ctx context.Context, tp string) context.Context {
	if tp == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": tp})
}

// Waiter wakes checkout calls on DoneChannel (one Pub/Sub connection per
// process); a shared loop rereads the status of calls waiting past recheck.
type Waiter struct {
	rdb     redis.UniversalClient
	log     *slog.Logger
	ready   chan struct{}
	once    sync.Once
	recheck time.Duration // period of the shared status loop

	mu    sync.Mutex
	waits map[string]*waitSet
}

// waitSet is the calls waiting for one attempt.
type waitSet struct {
	order string
	tr    int64
	saga  string
	due   time.Time // when the shared loop first reads the saga's status
	chans map[chan Result]struct{}
}

// newWaiter returns a waiter; Run must run for notifications to arrive.
func newWaiter(rdb redis.UniversalClient, log *slog.Logger, recheck time.Duration) *Waiter {
	return &Waiter{rdb: rdb, log: log, ready: make(chan struct{}), recheck: recheck, waits: map[string]*waitSet{}}
}

// Ready is closed once Run has subscribed.
func (w *Waiter) Ready() <-chan struct{} { return w.ready }

// Run subscribes to DoneChannel and runs the recheck loop until ctx ends;
// it fails only if the first subscribe fails.
func (w *Waiter) Run(ctx context.Context) error {
	ps := w.rdb.Subscribe(ctx, DoneChannel)
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("checkout: subscribe %s: %w", DoneChannel, err)
	}
	w.once.Do(func() { close(w.ready) })
	ch := ps.Channel()
	tick := time.NewTicker(w.recheck)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case m, ok := <-ch:
			if !ok {
				return nil
			}
			w.dispatch(m.Payload)
		case now := <-tick.C:
			w.recheckDue(ctx, now)
		}
	}
}

// recheckDue rereads overdue attempts in one pipeline and wakes finished ones.
func (w *Waiter) recheckDue(ctx context.Context, now time.Time) {
	type due struct {
		key string
		ws  *waitSet
		cmd *redis.SliceCmd
	}
	var list []due
	w.mu.Lock()
	for key, ws := range w.waits {
		if !now.Before(ws.due) {
			list = append(list, due{key: key, ws: ws})
		}
	}
	w.mu.Unlock()
	if len(list) == 0 {
		return
	}
	pipe := w.rdb.Pipeline()
	for i := range list {
		list[i].cmd = pipe.HMGet(ctx, list[i].ws.saga, "status", "reason")
	}
	if _, err := pipe.Exec(ctx); err != nil && ctx.Err() == nil {
		// Not final: the next tick reads again.
		w.log.WarnContext(ctx, "checkout: recheck waiting checkouts", "error", err, "count", len(list))
	}
	for _, d := range list {
		v := d.cmd.Val()
		if len(v) != 2 {
			continue
		}
		st, _ := v[0].(string)
		reason, _ := v[1].(string)
		if st == StatusSucceeded || st == StatusFailed {
			w.wake(d.key, Result{OrderID: d.ws.order, TrNum: d.ws.tr, Status: st, Reason: reason})
		}
	}
}

// dispatch wakes the calls of a DoneChannel payload "<order>|<tr>|<status>|<reason>".
func (w *Waiter) dispatch(payload string) {
	parts := strings.SplitN(payload, "|", 4)
	if len(parts) != 4 {
		w.log.Warn("checkout: malformed notification", "payload", payload)
		return
	}
	tr, _ := strconv.ParseInt(parts[1], 10, 64)
	w.wake(parts[0]+"|"+parts[1], Result{OrderID: parts[0], TrNum: tr, Status: parts[2], Reason: parts[3]})
}

// wake hands r to every call waiting on key.
func (w *Waiter) wake(key string, r Result) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ws := w.waits[key]
	if ws == nil {
		return
	}
	for c := range ws.chans {
		select {
		case c <- r:
		default:
		}
	}
}

// register adds a waiter of attempt tr; done removes it. Registered before
// the attempt starts, it needs no first status read.
func (w *Waiter) register(keys Keys, orderID string, tr int64, recheck time.Duration) (c chan Result, done func()) {
	key := orderID + "|" + strconv.FormatInt(tr, 10)
	c = make(chan Result, 1)
	w.mu.Lock()
	ws := w.waits[key]
	if ws == nil {
		ws = &waitSet{order: orderID, tr: tr, saga: keys.Saga(orderID, tr), due: time.Now().Add(recheck), chans: map[chan Result]struct{}{}}
		w.waits[key] = ws
	}
	ws.chans[c] = struct{}{}
	w.mu.Unlock()
	return c, func() {
		w.mu.Lock()
		delete(ws.chans, c)
		if len(ws.chans) == 0 && w.waits[key] == ws {
			delete(w.waits, key)
		}
		w.mu.Unlock()
	}
}

// await waits up to timeout on c for attempt tr's final status, else
// StatusPending, reading the status first when checkFirst is set.
func (w *Waiter) await(ctx context.Context, keys Keys, orderID string, tr int64, c chan Result, checkFirst bool, timeout time.Duration) (Result, error) {
	if checkFirst {
		v, err := w.rdb.HMGet(ctx, keys.Saga(orderID, tr), "status", "reason").Result()
		if err != nil {
			return Result{}, fmt.Errorf("checkout: saga %s/%d: %w", orderID, tr, err)
		}
		if st, _ := v[0].(string); st == StatusSucceeded || st == StatusFailed {
			reason, _ := v[1].(string)
			return Result{OrderID: orderID, TrNum: tr, Status: st, Reason: reason}, nil
		}
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	select {
	case r := <-c:
		return r, nil
	case <-deadline.C:
		return Result{OrderID: orderID, TrNum: tr, Status: StatusPending}, nil
	case <-ctx.Done():
		return Result{OrderID: orderID, TrNum: tr, Status: StatusPending}, ctx.Err()
	}
}
