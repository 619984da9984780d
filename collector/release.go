package collector

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dropstream/dropstream/internal/bounds"
	"github.com/dropstream/dropstream/internal/settings"
)

// MaxReleaseObservations bounds what one learning reads.
const MaxReleaseObservations = 100_000

// ReleaseObservation is a venue's new date's first raw open outside a baseline.
type ReleaseObservation struct {
	SourceID string
	Venue    string
	Date     string
	At       time.Time
}

// ReleaseLearner reads up to MaxReleaseObservations recent observations.
type ReleaseLearner interface {
	ReleaseObservations(ctx context.Context) ([]ReleaseObservation, error)
}

// ReleaseConfig learns each venue's release minutes from its first
// openings and polls every Burst from Before to After around them, within
// rate limits. The zero value is off.
type ReleaseConfig struct {
	// Learner reads the history. Default nil: learning off.
	Learner ReleaseLearner
	// Burst is the poll interval around a learned release, MinInterval..
	// Before. Default 5s, scaled by the jitter.
	Burst time.Duration `default:"5s"`
	// Before and After bound the burst around a release. Default 2m and 3m.
	Before time.Duration `default:"2m"`
	After  time.Duration `default:"3m"`
	// MinSupport is the number of distinct days a release minute must be
	// seen on (within a minute) to be kept, 1..100. Default 3.
	MinSupport int `default:"3" range:"1..100"`
	// Refresh is how often Run learns again. Default 10m.
	Refresh time.Duration `default:"10m" range:"1s.."`
	// Location is the time zone of the minutes and weekdays. Default UTC.
	Location *time.Location
}

// WithDefaults returns c with every zero field set to its default.
func (c ReleaseConfig) WithDefaults() ReleaseConfig {
	settings.Defaults(&c)
	c.Location = cmp.Or(c.Location, time.UTC)
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c ReleaseConfig) Validate() error {
	errs := []error{settings.Check("release", &c)}
	errs = bounds.Check(errs, "release burst", c.Burst, MinInterval, c.Before)
	if c.Before <= 0 || c.After <= 0 || c.Before+c.After > time.Hour {
		errs = append(errs, fmt.Errorf("release window -%s..+%s: want positive bounds within an hour", c.Before, c.After))
	}
	return errors.Join(errs...)
}

// Daily is ReleasePeak.Weekday of a minute seen on any weekday.
const Daily = -1

// ReleasePeak is a learned release minute of a venue.
type ReleasePeak struct {
	// Weekday is the day it applies to (time.Weekday), or Daily.
	Weekday int
	// Minute is the minute of the day, 0..1439.
	Minute int
	// Support is the number of distinct days it was seen on.
	Support int
}

// ReleaseSchedule holds the learned release peaks by source id and venue.
type ReleaseSchedule struct {
	peaks map[string]map[string][]ReleasePeak
	loc   *time.Location
}

// LearnReleases builds the schedule of obs: per source and venue, runs of
// neighbouring first-opening minutes seen on at least minSupport days.
func LearnReleases(obs []ReleaseObservation, minSupport int, loc *time.Location) ReleaseSchedule {
	type venueKey struct{ source, venue string }
	// days[venue][(weekday or 7 for daily)*1440 + minute] = distinct days
	days := map[venueKey]map[int]map[string]bool{}
	for _, o := range obs {
		k := venueKey{o.SourceID, o.Venue}
		h := days[k]
		if h == nil {
			h = map[int]map[string]bool{}
			days[k] = h
		}
		t := o.At.In(loc)
		m, day := t.Hour()*60+t.Minute(), t.Format(time.DateOnly)
		for _, w := range []int{int(t.Weekday()), 7} {
			if h[w*minutesPerDay+m] == nil {
				h[w*minutesPerDay+m] = map[string]bool{}
			}
			h[w*minutesPerDay+m][day] = true
		}
	}
	s := ReleaseSchedule{peaks: map[string]map[string][]ReleasePeak{}, loc: loc}
	for k, h := range days {
		var peaks []ReleasePeak
		for w := range 8 {
			weekday := w
			if w == 7 {
				weekday = Daily
			}
			peaks = append(peaks, clusterPeaks(h, w*minutesPerDay, weekday, minSupport)...)
		}
		if len(peaks) == 0 {
			continue
		}
		if s.peaks[k.source] == nil {
			s.peaks[k.source] = map[string][]ReleasePeak{}
		}
		s.peaks[k.source][k.venue] = peaks
	}
	return s
}

// minutesPerDay is the number of minutes of a day.
const minutesPerDay = 1440

// clusterPeaks returns the peaks of one day of h (days per minute, m at h[base+m]).
func clusterPeaks(h map[int]map[string]bool, base, weekday, minSupport int) []ReleasePeak {
	var out []ReleasePeak
	for m := 0; m < minutesPerDay; {
		if len(h[base+m]) == 0 {
			m++
			continue
		}
		support, best := map[string]bool{}, m
		for ; m < minutesPerDay && len(h[base+m]) > 0; m++ {
			for d := range h[base+m] {
				support[d] = true
			}
			if len(h[base+m]) > len(h[base+best]) {
				best = m
			}
		}
		if len(support) >= minSupport {
			out = append(out, ReleasePeak{Weekday: weekday, Minute: best, Support: len(support)})
		}
	}
	return out
}

// Peaks returns a venue's peaks, daily first, then by weekday and minute.
func (s ReleaseSchedule) Peaks(sourceID, venue string) []ReleasePeak {
	out := slices.Clone(s.peaks[sourceID][venue])
	slices.SortFunc(out, func(a, b ReleasePeak) int {
		return cmp.Or(cmp.Compare(a.Weekday, b.Weekday), cmp.Compare(a.Minute, b.Minute))
	})
	return out
}

// Len is the number of venues with peaks.
func (s ReleaseSchedule) Len() int {
	n := 0
	for _, v := range s.peaks {
		n += len(v)
	}
	return n
}

// window reports whether now is within a burst window of a venue ("": all
// of the source's), else the start of the next one within a day (zero: none).
func (s ReleaseSchedule) window(sourceID, venue string, now time.Time, before, after time.Duration) (in bool, next time.Time) {
	venues := s.peaks[sourceID]
	if len(venues) == 0 {
		return false, time.Time{}
	}
	local := now.In(s.loc)
	midnight := time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, s.loc)
	for v, peaks := range venues {
		if venue != "" && v != venue {
			continue
		}
		for _, p := range peaks {
			for day := -1; day <= 1; day++ {
				d := midnight.AddDate(0, 0, day)
				if p.Weekday != Daily && int(d.Weekday()) != p.Weekday {
					continue
				}
				at := d.Add(time.Duration(p.Minute) * time.Minute)
				start, end := at.Add(-before), at.Add(after)
				if !now.Before(start) && now.Before(end) {
					return true, time.Time{}
				}
				if start.After(now) && (next.IsZero() || start.Before(next)) {
					next = start
				}
			}
		}
	}
	return false, next
}

// Learn makes the observations' schedule the collector's (Run: at start
// and every Refresh).
func (c *Collector) Learn(ctx context.Context) error {
	rc := c.cfg.Releases
	if rc.Learner == nil {
		return errors.New("collector: learning needs CollectorConfig.Releases.Learner")
	}
	obs, err := rc.Learner.ReleaseObservations(ctx)
	if err != nil {
		return fmt.Errorf("collector: learn release times: %w", err)
	}
	if len(obs) > MaxReleaseObservations {
		obs = obs[:MaxReleaseObservations]
	}
	s := LearnReleases(obs, rc.MinSupport, rc.Location)
	c.mu.Lock()
	c.releases = s
	c.mu.Unlock()
	return nil
}

// Releases returns the learned release schedule.
func (c *Collector) Releases() ReleaseSchedule {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.releases
}

// learnLoop learns at once and every Refresh until ctx ends.
func (c *Collector) learnLoop(ctx context.Context) {
	for {
		if err := c.Learn(ctx); err != nil && ctx.Err() == nil {
			c.log.WarnContext(ctx, "release times not learned; keeping the last ones", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-c.cfg.Clock.Alarm(c.cfg.Clock.Now().Add(c.cfg.Releases.Refresh)):
		}
	}
}

// releaseDelay shortens the delay near a venue's releases: to the burst
// interval in a window, to its start before one. Backoff and 429s stand.
func (c *Collector) releaseDelay(src Source, scope int, res pollResult, delay time.Duration) time.Duration {
	rc := c.cfg.Releases
	throttled := res.outcome == OutcomeThrottled
	if rc.Learner == nil || (res.outcome != OutcomeOK && !throttled) || scope >= len(src.Scopes) {
		return delay
	}
	c.mu.Lock()
	s := c.releases
	c.mu.Unlock()
	now := c.cfg.Clock.Now()
	in, next := s.window(src.ID, src.Scopes[scope].Venue, now, rc.Before, rc.After)
	switch {
	case in && throttled:
		return min(delay, max(c.jitter(rc.Burst), res.retryAfter))
	case throttled:
		return delay
	case in:
		return min(delay, c.jitter(rc.Burst))
	case !next.IsZero() && next.Sub(now) < delay:
		return next.Sub(now)
	}
	return delay
}
