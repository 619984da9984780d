package collector

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// crockford is the Crockford base32 alphabet of ULIDs.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

var epoch = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)

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
	if got := ulid.ULID(max).String(); got != "7ZZZZZZZZZZZZZZZZZZZZZZZZZ" {
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
