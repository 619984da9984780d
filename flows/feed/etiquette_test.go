package feed

import (
	"testing"
	"time"

	"github.com/dropstream/dropstream/flows/feed/poll"
)

func TestEtiquette_nextPollHonoursTheFeedWithinBounds(t *testing.T) {
	cfg := EtiquetteConfig{MinInterval: 5 * time.Minute, MaxInterval: 12 * time.Hour}.WithDefaults()
	now := t0 // a Monday, 09:00 UTC
	every := 15 * time.Minute
	// arrivals every hour, the latest just now
	hourly := []time.Time{now, now.Add(-time.Hour), now.Add(-2 * time.Hour), now.Add(-3 * time.Hour)}
	tests := []struct {
		name       string
		s          schedule
		want       time.Duration
		wantReason string
	}{
		{"no hints: the feed's interval", schedule{}, every, ReasonInterval},
		{"max-age longer than the interval", schedule{hints: poll.Hints{FreshFor: time.Hour}}, time.Hour, ReasonFresh},
		{"max-age shorter than the interval", schedule{hints: poll.Hints{FreshFor: time.Minute}}, every, ReasonInterval},
		{"max-age capped at MaxInterval", schedule{hints: poll.Hints{FreshFor: 48 * time.Hour}}, 12 * time.Hour, ReasonFresh},
		{"ttl", schedule{hints: poll.Hints{FreshFor: 30 * time.Minute, TTL: 2 * time.Hour}}, 2 * time.Hour, ReasonTTL},
		{"skip hours: 09:15 and 10:xx skipped", schedule{hints: poll.Hints{SkipHours: []int{9, 10}}}, 2 * time.Hour, ReasonSkip},
		{"skip days: Monday skipped", schedule{hints: poll.Hints{SkipDays: []time.Weekday{time.Monday}}}, 12 * time.Hour, ReasonSkip},
		{"skip hours not reached", schedule{hints: poll.Hints{SkipHours: []int{20}}}, every, ReasonInterval},
		{"adaptive: hourly arrivals, half an hour", schedule{arrivals: hourly}, 30 * time.Minute, ReasonAdaptive},
		{"adaptive: quiet for a day, half a day", schedule{arrivals: []time.Time{now.Add(-24 * time.Hour), now.Add(-25 * time.Hour), now.Add(-26 * time.Hour)}}, 12 * time.Hour, ReasonAdaptive},
		{"adaptive: bursty, at least MinInterval", schedule{arrivals: []time.Time{now, now.Add(-time.Minute), now.Add(-2 * time.Minute)}}, 5 * time.Minute, ReasonAdaptive},
		{"adaptive: two arrivals are not enough", schedule{arrivals: hourly[:2]}, every, ReasonInterval},
		{"push: the fallback", schedule{fallback: 6 * time.Hour}, 6 * time.Hour, ReasonPush},
		{"failures: backoff", schedule{failures: 2}, time.Hour, ReasonBackoff},
		{"failures: Retry-After longer", schedule{failures: 1, retryAfter: 3 * time.Hour}, 3 * time.Hour, ReasonRetryAfter},
		{"failures: backoff capped", schedule{failures: 20}, 6 * time.Hour, ReasonBackoff},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.s
			s.every, s.now, s.maxBackoff = every, now, 6*time.Hour
			got, reason := cfg.next(s)
			if got != tt.want || reason != tt.wantReason {
				t.Errorf("next poll in %v (%s), want %v (%s)", got, reason, tt.want, tt.wantReason)
			}
		})
	}
}

func TestEtiquetteConfig_Validate(t *testing.T) {
	bad := []EtiquetteConfig{{MinInterval: time.Millisecond}, {MinInterval: time.Hour, MaxInterval: time.Minute}, {History: 2},
		{HostSpacing: -1}, {DeadAfter: -1}}
	for _, c := range bad {
		if err := c.WithDefaults().Validate(); err == nil {
			t.Errorf("%+v validated", c)
		}
	}
	if err := (EtiquetteConfig{}).WithDefaults().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	if err := (WebSubConfig{Lease: time.Second}).WithDefaults().Validate(); err == nil {
		t.Error("a lease of 1s validated")
	}
	if err := (Config{Etiquette: EtiquetteConfig{DeadAfter: -1}, WebSub: WebSubConfig{MaxBodyBytes: 1}}).WithDefaults().Validate(); err == nil {
		t.Error("the flow's config validated bad etiquette and websub fields")
	}
}
