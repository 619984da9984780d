package stream

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

type timeoutKey struct{}

// TestTimeout_meansWhatWithTimeoutMeans holds the handler's context to
// what context.WithTimeout gives: the same errors, causes and deadlines,
// for it and for contexts derived from it.
func TestTimeout_meansWhatWithTimeoutMeans(t *testing.T) {
	const d = 20 * time.Millisecond
	run := func(parent context.Context, h Handler) error { return Chain(h, Timeout(d))(parent, nil) }
	errX := errors.New("parent gone")
	tests := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"deadline ends it, never early", func(t *testing.T) {
			err := run(context.Background(), func(ctx context.Context, _ *Message) error {
				<-ctx.Done()
				if dl, _ := ctx.Deadline(); time.Now().Before(dl) {
					t.Errorf("ended at %v, before its deadline %v", time.Now(), dl)
				}
				if c := context.Cause(ctx); c != context.DeadlineExceeded {
					t.Errorf("Cause = %v, want DeadlineExceeded", c)
				}
				return ctx.Err()
			})
			if err != context.DeadlineExceeded {
				t.Errorf("Err = %v, want DeadlineExceeded", err)
			}
		}},
		{"children end with its error and deadline", func(t *testing.T) {
			_ = run(context.Background(), func(ctx context.Context, _ *Message) error {
				child, cancel := context.WithCancel(ctx)
				defer cancel()
				timed, cancelTimed := context.WithTimeout(ctx, time.Hour)
				defer cancelTimed()
				if a, b := ctx.Deadline(); true {
					if c, _ := timed.Deadline(); !c.Equal(a) || !b {
						t.Errorf("child deadline %v, want its parent's %v", c, a)
					}
				}
				<-child.Done()
				<-timed.Done()
				if child.Err() != context.DeadlineExceeded || timed.Err() != context.DeadlineExceeded {
					t.Errorf("children ended with %v and %v, want DeadlineExceeded", child.Err(), timed.Err())
				}
				return nil
			})
		}},
		{"ended once the handler returns", func(t *testing.T) {
			var kept context.Context
			_ = run(context.Background(), func(ctx context.Context, _ *Message) error { kept = ctx; return nil })
			select {
			case <-kept.Done():
			default:
				t.Error("Done not closed after the handler returned")
			}
			if kept.Err() != context.Canceled {
				t.Errorf("Err after return = %v, want Canceled", kept.Err())
			}
			child, cancel := context.WithCancel(kept)
			defer cancel()
			if child.Err() != context.Canceled {
				t.Errorf("a child made after return: Err %v, want Canceled", child.Err())
			}
		}},
		{"parent ending ends it and its children, with the parent's cause", func(t *testing.T) {
			parent, cancel := context.WithCancelCause(context.Background())
			_ = Chain(func(ctx context.Context, _ *Message) error {
				child, cancelChild := context.WithCancel(ctx)
				defer cancelChild()
				cancel(errX)
				<-ctx.Done()
				<-child.Done()
				if ctx.Err() != context.Canceled || context.Cause(ctx) != errX || child.Err() != context.Canceled {
					t.Errorf("Err %v, Cause %v, child %v; want Canceled, the parent's cause, Canceled", ctx.Err(), context.Cause(ctx), child.Err())
				}
				return nil
			}, Timeout(time.Hour))(parent, nil)
		}},
		{"parent ended: Err says so without Done", func(t *testing.T) {
			parent, cancel := context.WithCancel(context.Background())
			cancel()
			_ = Chain(func(ctx context.Context, _ *Message) error {
				if ctx.Err() != context.Canceled {
					t.Errorf("Err = %v, want Canceled", ctx.Err())
				}
				return nil
			}, Timeout(time.Hour))(parent, nil)
		}},
		{"AfterFunc runs at the end, or not once stopped", func(t *testing.T) {
			ran := make(chan string, 2)
			_ = run(context.Background(), func(ctx context.Context, _ *Message) error {
				context.AfterFunc(ctx, func() { ran <- "kept" })
				stop := context.AfterFunc(ctx, func() { ran <- "stopped" })
				if !stop() {
					t.Error("stop before the end reported false")
				}
				<-ctx.Done()
				return nil
			})
			if got := <-ran; got != "kept" {
				t.Errorf("ran %q, want the kept function", got)
			}
			select {
			case got := <-ran:
				t.Errorf("ran %q after it was stopped", got)
			case <-time.After(10 * time.Millisecond):
			}
		}},
		{"values come from the parent", func(t *testing.T) {
			parent := context.WithValue(context.Background(), timeoutKey{}, "v")
			_ = run(parent, func(ctx context.Context, _ *Message) error {
				if ctx.Value(timeoutKey{}) != "v" {
					t.Errorf("Value = %v, want the parent's", ctx.Value(timeoutKey{}))
				}
				return nil
			})
		}},
		{"calls at once each end at their own deadline", func(t *testing.T) {
			h := Chain(func(ctx context.Context, _ *Message) error {
				<-ctx.Done()
				if dl, _ := ctx.Deadline(); time.Now().Before(dl) {
					t.Errorf("ended before its deadline")
				}
				return ctx.Err()
			}, Timeout(d))
			var wg sync.WaitGroup
			for i := range 16 {
				wg.Go(func() {
					time.Sleep(time.Duration(i) * time.Millisecond) // staggered starts, not synchronization
					if err := h(context.Background(), nil); err != context.DeadlineExceeded {
						t.Errorf("call %d: %v, want DeadlineExceeded", i, err)
					}
				})
			}
			wg.Wait()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.fn)
	}
}
