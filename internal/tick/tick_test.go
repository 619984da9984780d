package tick_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dropstream/dropstream/internal/tick"
)

func TestEvery_callsUntilCancelled(t *testing.T) {
	for _, tc := range []struct {
		name  string
		run   func(context.Context, time.Duration, func())
		first int // calls made before the first period passes
	}{
		{name: "every calls at once", run: tick.Every, first: 1},
		{name: "every after waits a period", run: tick.EveryAfter, first: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			calls := 0
			done := make(chan struct{})
			go func() {
				defer close(done)
				tc.run(ctx, time.Hour, func() { calls++ })
			}()
			cancel()
			<-done
			if calls != tc.first {
				t.Fatalf("calls = %d, want %d", calls, tc.first)
			}
			ctx, cancel = context.WithCancel(context.Background())
			calls = 0
			tc.run(ctx, time.Millisecond, func() {
				if calls++; calls == 3 {
					cancel()
				}
			})
			if calls != 3 {
				t.Fatalf("calls = %d, want 3", calls)
			}
		})
	}
}

func TestSleep_endsWithContext(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		d    time.Duration
		want error
	}{
		{name: "whole wait", ctx: context.Background(), d: time.Millisecond},
		{name: "no wait", ctx: context.Background(), d: -time.Second},
		{name: "cancelled", ctx: cancelled, d: time.Hour, want: context.Canceled},
		{name: "cancelled, no wait", ctx: cancelled, d: 0, want: context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tick.Sleep(tc.ctx, tc.d); !errors.Is(err, tc.want) {
				t.Fatalf("Sleep = %v, want %v", err, tc.want)
			}
		})
	}
}
