package stream_test

import (
	"testing"
	"time"

	"github.com/dropstream/dropstream/stream"
)

func TestBackoffAfter_doublesFromTheFirstPauseUpToTheMax(t *testing.T) {
	for _, tc := range []struct {
		failures int
		want     time.Duration
	}{{1, time.Second}, {2, 2 * time.Second}, {4, 8 * time.Second}, {5, 10 * time.Second}, {1000, 10 * time.Second}} {
		if got := stream.BackoffAfter(tc.failures, time.Second, 10*time.Second); got != tc.want {
			t.Errorf("BackoffAfter(%d) = %s, want %s", tc.failures, got, tc.want)
		}
	}
}

func TestNewBackoff_exactPausesDoubleAndResetStartsAgain(t *testing.T) {
	b := stream.NewBackoff(50*time.Millisecond, 300*time.Millisecond, 0)
	want := []time.Duration{50, 100, 200, 300, 300}
	for i, w := range want {
		if got := b.NextBackOff(); got != w*time.Millisecond {
			t.Fatalf("pause %d = %s, want %s", i+1, got, w*time.Millisecond)
		}
	}
	b.Reset()
	if got := b.NextBackOff(); got != 50*time.Millisecond {
		t.Fatalf("after Reset: %s, want 50ms", got)
	}
}

func TestNewBackoff_randomizedPausesStayWithinTheirBand(t *testing.T) {
	b := stream.NewBackoff(time.Second, time.Second, 0.5)
	for range 200 {
		if got := b.NextBackOff(); got < 500*time.Millisecond || got > 1500*time.Millisecond {
			t.Fatalf("pause %s outside [0.5s, 1.5s]", got)
		}
	}
}
