package notifier

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// DefaultResumeEpisodeGap ends an episode of resumed sends, logged in one
// line once this long passes without another.
const DefaultResumeEpisodeGap = 5 * time.Second

// MsgResumed is the warning logged once per episode of resumed sends, with
// fields deliveries, flows and seconds (first to last).
const MsgResumed = "notifier: resent deliveries a stopped copy left in flight; their receivers may have got them twice, " +
	"with the same webhook-id (counted in " + MetricResumed + ")"

// resumeEpisode gathers the resumed sends of one episode.
type resumeEpisode struct {
	mu          sync.Mutex
	gap         time.Duration // DefaultResumeEpisodeGap unless a test sets it
	open        bool
	n           int
	flows       map[string]bool
	first, last time.Time
}

// logResumed adds n resumed sends of flow to the episode, opening one.
func (d *Dispatcher) logResumed(flow string, n int) {
	e := &d.resumed
	e.mu.Lock()
	defer e.mu.Unlock()
	now := time.Now()
	e.n, e.last = e.n+n, now
	if e.flows == nil {
		e.flows = map[string]bool{}
	}
	e.flows[flow] = true
	if !e.open {
		e.open, e.first = true, now
		time.AfterFunc(cmp.Or(e.gap, DefaultResumeEpisodeGap), d.endResumed)
	}
}

// endResumed logs the episode once the gap has passed.
func (d *Dispatcher) endResumed() {
	e := &d.resumed
	e.mu.Lock()
	defer e.mu.Unlock()
	if wait := cmp.Or(e.gap, DefaultResumeEpisodeGap) - time.Since(e.last); wait > 0 {
		time.AfterFunc(wait, d.endResumed)
		return
	}
	flows := slices.Sorted(maps.Keys(e.flows))
	d.logger.Warn(MsgResumed, "deliveries", e.n, "flows", strings.Join(flows, ","), "seconds", e.last.Sub(e.first).Seconds())
	e.open, e.n, e.flows = false, 0, nil
}
