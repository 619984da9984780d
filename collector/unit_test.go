package collector

import (
	"net/http"
	"sort"
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBucket(tt.rate, tt.burst)
			for i, s := range tt.steps {
				if s.at < 0 {
					b.pause(epoch.Add(-s.at))
					continue
				}
				if got := b.reserve(epoch.Add(s.at)); !got.Equal(epoch.Add(s.going)) {
					t.Errorf("step %d: turn at %v, want epoch+%v", i, got.Sub(epoch), s.going)
				}
			}
		})
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
		got, ok := parseRetryAfter(tt.in, epoch, limit)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestNewRunID_isAUniqueTimeOrderedULID(t *testing.T) {
	seen := map[string]bool{}
	var ids []string
	for i := range 1000 {
		id := NewRunID(epoch.Add(time.Duration(i) * time.Millisecond))
		if len(id) != 26 || strings.Trim(id, crockford) != "" || seen[id] {
			t.Fatalf("run id %q: want 26 fresh Crockford base32 characters", id)
		}
		seen[id] = true
		ids = append(ids, id)
	}
	if !sort.StringsAreSorted(ids) {
		t.Error("ids of increasing milliseconds do not sort by time")
	}
	// The ULID spec's example: 01ARYZ6S41 is 1469918176385 ms.
	if got := NewRunID(time.UnixMilli(1469918176385))[:10]; got != "01ARYZ6S41" {
		t.Errorf("time part %q, want 01ARYZ6S41", got)
	}
	var max [16]byte
	for i := range max {
		max[i] = 0xff
	}
	if got := encodeULID(max); got != "7ZZZZZZZZZZZZZZZZZZZZZZZZZ" {
		t.Errorf("largest ULID %q", got)
	}
}

func TestNextDelay_doublesPerFailureUpToTheCap(t *testing.T) {
	c := &Collector{cfg: CollectorConfig{NoJitter: true, MaxBackoff: 5 * time.Minute}}
	tests := []struct {
		name     string
		interval time.Duration
		res      pollResult
		want     time.Duration
	}{
		{"ok", time.Minute, pollResult{outcome: OutcomeOK}, time.Minute},
		{"first failure", time.Minute, pollResult{outcome: OutcomeFailed, failures: 1}, time.Minute},
		{"third failure", time.Minute, pollResult{outcome: OutcomeFailed, failures: 3}, 4 * time.Minute},
		{"capped", time.Minute, pollResult{outcome: OutcomeTimeout, failures: 30}, 5 * time.Minute},
		{"interval above the cap", time.Hour, pollResult{outcome: OutcomeFailed, failures: 4}, time.Hour},
		{"retry-after longer", time.Minute, pollResult{outcome: OutcomeThrottled, failures: 1, retryAfter: 3 * time.Minute}, 3 * time.Minute},
		{"retry-after shorter", time.Minute, pollResult{outcome: OutcomeThrottled, failures: 2, retryAfter: time.Second}, 2 * time.Minute},
	}
	for _, tt := range tests {
		if got := c.nextDelay(tt.interval, tt.res); got != tt.want {
			t.Errorf("%s: nextDelay = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestJitter_staysWithinItsWindow(t *testing.T) {
	c := &Collector{cfg: CollectorConfig{Jitter: 0.1}}
	lo, hi := time.Hour, time.Duration(0)
	for range 2000 {
		d := c.jitter(time.Minute)
		lo, hi = min(lo, d), max(hi, d)
		if f := c.firstDelay(time.Minute); f < 0 || f > 6*time.Second {
			t.Fatalf("first delay %v outside 0..6s", f)
		}
	}
	if lo < 54*time.Second || hi > 66*time.Second || hi-lo < 6*time.Second {
		t.Errorf("jittered minutes span %v..%v, want most of 54s..66s", lo, hi)
	}
}
