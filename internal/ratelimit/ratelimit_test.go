package ratelimit

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

var epoch = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)

func TestBucket_reserveSpacesTurnsAndHonoursPauses(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name  string
		rate  float64
		burst int
		steps []struct {
			at    time.Duration // reserve at epoch+at; negative: pause until epoch-at
			going time.Duration // expected turn, relative to epoch
		}
	}{
		{"burst 1 at 2/s", 2, 1, []struct{ at, going time.Duration }{{0, 0}, {0, 500 * ms}, {0, 1000 * ms}, {3000 * ms, 3000 * ms}}},
		{"burst 3 then spacing", 1, 3, []struct{ at, going time.Duration }{{0, 0}, {0, 0}, {0, 0}, {0, 1000 * ms}, {10 * time.Second, 10 * time.Second}}},
		{"refill is capped by the burst", 10, 2, []struct{ at, going time.Duration }{{0, 0}, {time.Hour, time.Hour}, {time.Hour, time.Hour}, {time.Hour, time.Hour + 100*ms}}},
		{"a pause holds turns", 1, 5, []struct{ at, going time.Duration }{{0, 0}, {-30 * time.Second, 0}, {time.Second, 30 * time.Second}, {time.Second, 31 * time.Second}}},
		{"an earlier pause changes nothing", 1, 5, []struct{ at, going time.Duration }{{-30 * time.Second, 0}, {-10 * time.Second, 0}, {0, 30 * time.Second}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBucket(tt.rate, tt.burst)
			for i, s := range tt.steps {
				if s.at < 0 {
					b.Pause(epoch.Add(-s.at))
					continue
				}
				if got := b.Reserve(epoch.Add(s.at)); !got.Equal(epoch.Add(s.going)) {
					t.Errorf("step %d: turn at %v, want epoch+%v", i, got.Sub(epoch), s.going)
				}
			}
		})
	}
}

func TestBucket_pausedAndSetRate(t *testing.T) {
	b := NewBucket(1, 1)
	if _, held := b.Paused(epoch); held {
		t.Fatal("a new bucket is paused")
	}
	b.Pause(epoch.Add(time.Minute))
	if until, held := b.Paused(epoch); !held || !until.Equal(epoch.Add(time.Minute)) {
		t.Fatalf("Paused = %v, %v; want epoch+1m, true", until, held)
	}
	if _, held := b.Paused(epoch.Add(time.Minute)); held {
		t.Fatal("still paused when the pause ends")
	}
	b.SetRate(4)
	b.Reserve(epoch.Add(time.Minute)) // the one token left after the pause
	if got := b.Reserve(epoch.Add(time.Minute)); !got.Equal(epoch.Add(time.Minute + 250*time.Millisecond)) {
		t.Errorf("turn at the new rate: epoch+%v, want epoch+1m0.25s", got.Sub(epoch))
	}
}

func TestBucket_waitReturnsAtOnceWithATokenAndStopsWithItsContext(t *testing.T) {
	b := NewBucket(0.001, 1)
	if err := b.Wait(t.Context()); err != nil {
		t.Fatalf("first wait: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := b.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait for a turn in 1000s with a canceled context: %v, want context.Canceled", err)
	}
}

func TestParseRetryAfter_secondsAndDates(t *testing.T) {
	limit := time.Hour
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true},
		{"120", 2 * time.Minute, true},
		{" 5 ", 5 * time.Second, true},
		{"7200", time.Hour, true},
		{"99999999999999999999999", time.Hour, true},
		{epoch.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{epoch.Add(-time.Minute).Format(http.TimeFormat), 0, true},
		{"Fri, 20 Nov 2026 12:00:30 GMT", 30 * time.Second, true},
		{"", 0, false},
		{"-5", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
		{strings.Repeat("9", 100), 0, false},
	}
	for _, tt := range tests {
		got, ok := ParseRetryAfter(tt.in, epoch, limit)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}
