package stream

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestChain_firstIsOutermost(t *testing.T) {
	var trace []string
	mw := func(name string) Middleware {
		return func(next Handler) Handler {
			return func(ctx context.Context, msg *Message) error {
				trace = append(trace, name+">")
				err := next(ctx, msg)
				trace = append(trace, "<"+name)
				return err
			}
		}
	}
	sentinel := errors.New("handler error")
	h := Chain(func(context.Context, *Message) error { trace = append(trace, "h"); return sentinel },
		mw("a"), mw("b"), mw("c"))
	if err := h(context.Background(), NewMessage("k", "t", nil)); err != sentinel {
		t.Errorf("chain returned %v, want the handler's error", err)
	}
	want := "a> b> c> h <c <b <a"
	if got := strings.Join(trace, " "); got != want {
		t.Errorf("call order %q, want %q", got, want)
	}

	trace = nil
	if err := Chain(func(context.Context, *Message) error { trace = append(trace, "h"); return nil })(context.Background(), nil); err != nil || len(trace) != 1 {
		t.Errorf("empty chain: err %v, calls %v", err, trace)
	}
}

func TestRecovery_panicBecomesPanicError(t *testing.T) {
	valueErr := errors.New("value is an error")
	tests := []struct {
		name  string
		value any
	}{
		{"string", "boom"},
		{"error", valueErr},
		{"int", 42},
		{"runtime error", nil}, // an index out of range, below
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := Chain(func(context.Context, *Message) error {
				if tc.value == nil {
					var s []int
					_ = s[len(tc.name)]
				}
				panic(tc.value)
			}, Recovery())
			err := h(context.Background(), NewMessage("k", "t", nil))
			var pe *PanicError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %#v, want *PanicError", err)
			}
			if tc.value != nil && pe.Value != tc.value {
				t.Errorf("Value = %#v, want %#v", pe.Value, tc.value)
			}
			if tc.value == nil && !strings.Contains(fmt.Sprint(pe.Value), "index out of range") {
				t.Errorf("Value = %v, want the runtime error", pe.Value)
			}
			if !strings.Contains(err.Error(), "handler panic: ") {
				t.Errorf("Error() = %q", err)
			}
			stack := string(pe.Stack)
			if !strings.Contains(stack, "goroutine ") || !strings.Contains(stack, "TestRecovery_panicBecomesPanicError") {
				t.Errorf("Stack does not show the panicking test handler:\n%s", stack)
			}
			if Classify(err) != OutcomeFailed {
				t.Errorf("Classify(panic) = %q, want failed (retried)", Classify(err))
			}
		})
	}
}

func TestRecovery_panicNilAndPassThrough(t *testing.T) {
	err := Chain(func(context.Context, *Message) error { panic(nil) }, Recovery())(context.Background(), nil)
	var pe *PanicError
	if !errors.As(err, &pe) {
		t.Errorf("panic(nil) gave %v, want *PanicError", err)
	}
	plain := errors.New("plain")
	if err := Chain(func(context.Context, *Message) error { return plain }, Recovery())(context.Background(), nil); err != plain {
		t.Errorf("error passed through as %v", err)
	}
	if err := Chain(func(context.Context, *Message) error { return nil }, Recovery())(context.Background(), nil); err != nil {
		t.Errorf("success became %v", err)
	}
}

func TestTimeout_handlerContextHasDeadline(t *testing.T) {
	const d = 3 * time.Second
	var hctx context.Context
	before := time.Now()
	err := Chain(func(ctx context.Context, _ *Message) error { hctx = ctx; return nil }, Timeout(d))(context.Background(), nil)
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	dl, ok := hctx.Deadline()
	if !ok {
		t.Fatal("handler context has no deadline")
	}
	if dl.Before(before.Add(d)) || dl.After(after.Add(d)) {
		t.Errorf("deadline %v not within [%v, %v]", dl, before.Add(d), after.Add(d))
	}
	if hctx.Err() == nil {
		t.Error("handler context not cancelled after the handler returned")
	}

	// An earlier parent deadline wins.
	parent, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	pdl, _ := parent.Deadline()
	_ = Chain(func(ctx context.Context, _ *Message) error { hctx = ctx; return nil }, Timeout(time.Hour))(parent, nil)
	if dl, _ := hctx.Deadline(); !dl.Equal(pdl) {
		t.Errorf("deadline %v, want the parent's %v", dl, pdl)
	}

	// A handler honouring its context returns once the deadline passes.
	err = Chain(func(ctx context.Context, _ *Message) error { <-ctx.Done(); return ctx.Err() }, Timeout(time.Millisecond))(context.Background(), nil)
	if !errors.Is(err, context.DeadlineExceeded) || Classify(err) != OutcomeFailed {
		t.Errorf("timed-out handler returned %v (%s), want DeadlineExceeded, failed", err, Classify(err))
	}
}

// unitFast is a retry config with pauses of (almost) nothing.
func unitFast(maxRetries int) RetryConfig {
	return RetryConfig{MaxRetries: maxRetries, InitialInterval: time.Nanosecond, MaxInterval: time.Nanosecond}
}

func TestRetry_callCounts(t *testing.T) {
	base := errors.New("fail")
	tests := []struct {
		name      string
		cfg       RetryConfig
		succeedAt int          // call number that succeeds; 0: never
		fail      func() error // the failing error
		calls     int
		wantNil   bool
	}{
		{"always failing, 3 retries", unitFast(3), 0, func() error { return base }, 4, false},
		{"always failing, 1 retry", unitFast(1), 0, func() error { return base }, 2, false},
		{"zero retries means the default 2", unitFast(0), 0, func() error { return base }, 3, false},
		{"negative retries: no retry", unitFast(-1), 0, func() error { return base }, 1, false},
		{"success at once", unitFast(3), 1, func() error { return base }, 1, true},
		{"success at the second call", unitFast(3), 2, func() error { return base }, 2, true},
		{"success at the last retry", unitFast(3), 4, func() error { return base }, 4, true},
		{"permanent not retried", unitFast(3), 0, func() error { return Permanent(base) }, 1, false},
		{"ErrDrop not retried", unitFast(3), 0, func() error { return fmt.Errorf("skip: %w", ErrDrop) }, 1, false},
		{"disabled", RetryConfig{MaxRetries: 3, Disabled: true}, 0, func() error { return base }, 1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			var last error
			h := Chain(func(context.Context, *Message) error {
				calls++
				if calls == tc.succeedAt {
					return nil
				}
				last = fmt.Errorf("call %d: %w", calls, tc.fail())
				return last
			}, Retry(tc.cfg))
			err := h(context.Background(), NewMessage("k", "t", nil))
			if calls != tc.calls {
				t.Errorf("handler called %d times, want %d", calls, tc.calls)
			}
			if tc.wantNil {
				if err != nil {
					t.Errorf("err = %v, want nil", err)
				}
				return
			}
			if err != last {
				t.Errorf("err = %v, want the last error %v", err, last)
			}
		})
	}
}

func TestRetry_stopsWhenContextEnds(t *testing.T) {
	base := errors.New("fail")
	slow := RetryConfig{MaxRetries: 5, InitialInterval: time.Hour, MaxInterval: time.Hour}
	tests := []struct {
		name          string
		cancelBefore  bool // cancel before the call
		cancelInCall1 bool // the handler cancels during its first call
	}{
		{"already cancelled", true, false},
		{"cancelled during the handler", false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancelBefore {
				cancel()
			}
			calls := 0
			h := Chain(func(context.Context, *Message) error {
				calls++
				if tc.cancelInCall1 {
					cancel()
				}
				return base
			}, Retry(slow))
			done := make(chan error, 1)
			go func() { done <- h(ctx, NewMessage("k", "t", nil)) }()
			select {
			case err := <-done:
				if calls != 1 || err != base {
					t.Errorf("calls %d, err %v; want 1 call returning the handler's error", calls, err)
				}
			case <-time.After(30 * time.Second): // a safety net only: the pause is an hour
				t.Fatal("Retry kept waiting for its backoff after the context ended")
			}
		})
	}
}

// TestRetry_noPauseAfterStop: in a runner's handler context, the handler
// keeps running after the runner is asked to stop, but no retry pause
// starts, and one in progress ends.
func TestRetry_noPauseAfterStop(t *testing.T) {
	base := errors.New("fail")
	slow := RetryConfig{MaxRetries: 5, InitialInterval: time.Hour, MaxInterval: time.Hour}
	tests := []struct {
		name        string
		stopBefore  bool // stop before the call
		stopInCall1 bool // stop during the first call
	}{
		{"stopped before the call", true, false},
		{"stopped during the handler", false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stop, stopNow := context.WithCancel(context.Background())
			defer stopNow()
			ctx, release := drainContext(stop, time.Hour)
			defer release()
			if tc.stopBefore {
				stopNow()
			}
			calls := 0
			h := Chain(func(ctx context.Context, _ *Message) error {
				calls++
				if tc.stopInCall1 {
					stopNow()
				}
				if ctx.Err() != nil {
					return ctx.Err() // the handler context must outlive the stop
				}
				return base
			}, Retry(slow))
			done := make(chan error, 1)
			go func() { done <- h(ctx, NewMessage("k", "t", nil)) }()
			select {
			case err := <-done:
				if calls != 1 || err != base {
					t.Errorf("calls %d, err %v; want 1 call returning the handler's error", calls, err)
				}
			case <-time.After(30 * time.Second): // a safety net only: the pause is an hour
				t.Fatal("Retry paused after the runner was asked to stop")
			}
		})
	}
}

// TestDrainContext_endsDrainAfterStop: the handler context outlives the
// stop by the drain, then ends; without a stop it lasts until released.
func TestDrainContext_endsDrainAfterStop(t *testing.T) {
	stop, stopNow := context.WithCancel(context.Background())
	ctx, release := drainContext(stop, 50*time.Millisecond)
	defer release()
	if stopped(ctx) || ctx.Err() != nil {
		t.Fatal("handler context ended or stopped before the stop")
	}
	stopNow()
	if !stopped(ctx) {
		t.Error("stop not seen through the handler context")
	}
	select {
	case <-ctx.Done():
	case <-time.After(30 * time.Second): // a safety net only
		t.Fatal("handler context did not end after the drain")
	}
	other, releaseOther := drainContext(context.Background(), time.Millisecond)
	releaseOther()
	if other.Err() == nil {
		t.Error("released handler context still open")
	}
}

func TestGiveUp_attempts(t *testing.T) {
	const maxDel = 3
	base := errors.New("transient")
	tests := []struct {
		name       string
		attempt    int
		handlerErr error
		wantCalled bool
		check      func(t *testing.T, err error)
	}{
		{"failure before the last delivery passes through", 1, base, true, unitSame(base)},
		{"failure one before the last passes through", maxDel - 1, base, true, unitSame(base)},
		{"failure at the last delivery becomes permanent", maxDel, base, true, func(t *testing.T, err error) {
			if !IsPermanent(err) || !errors.Is(err, base) || Classify(err) != OutcomeDeadLettered {
				t.Errorf("err = %v, want Permanent wrapping %v", err, base)
			}
		}},
		{"success at the last delivery stays nil", maxDel, nil, true, unitSame(nil)},
		{"drop at the last delivery stays a drop", maxDel, ErrDrop, true, unitSame(ErrDrop)},
		{"permanent before the last delivery passes through", 1, Permanent(base), true, func(t *testing.T, err error) {
			if !IsPermanent(err) || !errors.Is(err, base) {
				t.Errorf("err = %v", err)
			}
		}},
		{"beyond the last delivery: not handled, dead-lettered", maxDel + 1, nil, false, func(t *testing.T, err error) {
			if !IsPermanent(err) || !errors.Is(err, ErrMaxDeliveries) || Classify(err) != OutcomeDeadLettered {
				t.Errorf("err = %v, want Permanent wrapping ErrMaxDeliveries", err)
			}
			if !strings.Contains(err.Error(), "delivery 4 of 3") {
				t.Errorf("err = %q, want it to say delivery 4 of 3", err)
			}
		}},
		{"far beyond the last delivery", 100, nil, false, func(t *testing.T, err error) {
			if !IsPermanent(err) || !errors.Is(err, ErrMaxDeliveries) {
				t.Errorf("err = %v, want Permanent wrapping ErrMaxDeliveries", err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			called := false
			h := Chain(func(context.Context, *Message) error { called = true; return tc.handlerErr }, GiveUp(maxDel))
			m := NewMessage("k", "t", nil)
			m.Attempt = tc.attempt
			err := h(context.Background(), m)
			if called != tc.wantCalled {
				t.Errorf("handler called = %v, want %v", called, tc.wantCalled)
			}
			tc.check(t, err)
		})
	}
}

func unitSame(want error) func(*testing.T, error) {
	return func(t *testing.T, err error) {
		t.Helper()
		if err != want {
			t.Errorf("err = %v, want %v unchanged", err, want)
		}
	}
}
