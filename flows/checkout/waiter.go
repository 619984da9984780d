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
)

// Waiter wakes checkout calls when the order stage announces their
// attempt's outcome on DoneChannel. One Pub/Sub connection serves every
// waiting call of the process. Notifications are a shortcut, not the
// record: a waiting call reads the saga's status when it starts waiting
// and every recheck interval, so a notification lost (Pub/Sub drops
// messages while it reconnects) only delays the answer.
type Waiter struct {
	rdb   redis.UniversalClient
	log   *slog.Logger
	ready chan struct{}
	once  sync.Once

	mu    sync.Mutex
	waits map[string]map[chan Result]struct{}
}

// NewWaiter returns a waiter; Run must run for notifications to arrive.
func NewWaiter(rdb redis.UniversalClient, log *slog.Logger) *Waiter {
	if log == nil {
		log = slog.Default()
	}
	return &Waiter{rdb: rdb, log: log, ready: make(chan struct{}), waits: map[string]map[chan Result]struct{}{}}
}

// Ready is closed once Run has subscribed.
func (w *Waiter) Ready() <-chan struct{} { return w.ready }

// Run subscribes to DoneChannel and dispatches notifications until ctx
// ends. It returns an error only if it cannot subscribe at first.
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
	for {
		select {
		case <-ctx.Done():
			return nil
		case m, ok := <-ch:
			if !ok {
				return nil
			}
			w.dispatch(m.Payload)
		}
	}
}

// notification is DoneChannel's payload: "<order>|<tr>|<status>|<reason>".
func notification(orderID string, tr int64, status, reason string) string {
	return orderID + "|" + strconv.FormatInt(tr, 10) + "|" + status + "|" + reason
}

func (w *Waiter) dispatch(payload string) {
	parts := strings.SplitN(payload, "|", 4)
	if len(parts) != 4 {
		w.log.Warn("checkout: malformed notification", "payload", payload)
		return
	}
	tr, _ := strconv.ParseInt(parts[1], 10, 64)
	r := Result{OrderID: parts[0], TrNum: tr, Status: parts[2], Reason: parts[3]}
	w.mu.Lock()
	for c := range w.waits[parts[0]+"|"+parts[1]] {
		select {
		case c <- r:
		default:
		}
	}
	w.mu.Unlock()
}

// Wait waits up to timeout for attempt tr of an order to reach a final
// status and returns it; on timeout the Result has StatusPending.
func (w *Waiter) Wait(ctx context.Context, keys Keys, orderID string, tr int64, timeout, recheck time.Duration) (Result, error) {
	c, done := w.register(orderID, tr)
	defer done()
	return w.await(ctx, keys, orderID, tr, c, true, timeout, recheck)
}

// register adds a waiter of attempt tr of an order; done removes it.
// Registering before the attempt starts means its notification cannot be
// missed, so the first status read can be skipped.
func (w *Waiter) register(orderID string, tr int64) (c chan Result, done func()) {
	key := orderID + "|" + strconv.FormatInt(tr, 10)
	c = make(chan Result, 1)
	w.mu.Lock()
	if w.waits[key] == nil {
		w.waits[key] = map[chan Result]struct{}{}
	}
	w.waits[key][c] = struct{}{}
	w.mu.Unlock()
	return c, func() {
		w.mu.Lock()
		delete(w.waits[key], c)
		if len(w.waits[key]) == 0 {
			delete(w.waits, key)
		}
		w.mu.Unlock()
	}
}

// await waits on a registered channel, reading the saga's status first
// when checkFirst is set and every recheck interval.
func (w *Waiter) await(ctx context.Context, keys Keys, orderID string, tr int64, c chan Result, checkFirst bool, timeout, recheck time.Duration) (Result, error) {
	check := func() (Result, bool, error) {
		st, reason, err := sagaStatus(ctx, w.rdb, keys, orderID, tr)
		if err != nil {
			return Result{}, false, err
		}
		r := Result{OrderID: orderID, TrNum: tr, Status: st, Reason: reason}
		return r, st == StatusSucceeded || st == StatusFailed, nil
	}
	if checkFirst {
		if r, done, err := check(); err != nil || done {
			return r, err
		}
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(recheck)
	defer tick.Stop()
	for {
		select {
		case r := <-c:
			return r, nil
		case <-tick.C:
			// A Redis error here is not final: the saga may still finish.
			if r, done, err := check(); err == nil && done {
				return r, nil
			}
		case <-deadline.C:
			return Result{OrderID: orderID, TrNum: tr, Status: StatusPending}, nil
		case <-ctx.Done():
			return Result{OrderID: orderID, TrNum: tr, Status: StatusPending}, ctx.Err()
		}
	}
}
