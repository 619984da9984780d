package notifier

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// DefaultResumeEpisodeGap ends an episode of resumed sends: the sends a
// stopped delivery left in flight, resent by the redeliveries that follow
// a restart, are logged in one line once this long has passed without
// another.
const DefaultResumeEpisodeGap = 5 * time.Second

// MsgResumed is the warning a Dispatcher logs once per episode of resumed
// sends, DefaultResumeEpisodeGap after the last one: its fields are
// deliveries (how many were sent again), flows and seconds (from the
// first to the last). A copy stopped within the episode does not log it;
// MetricResumed still counts them.
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

// logResumed adds n resumed sends of flow to the current episode,
// opening one if none is: the episode is logged once, with its count,
// when no send was resumed for the gap.
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
		time.AfterFunc(e.gapOrDefault(), d.endResumed)
	}
}

func (e *resumeEpisode) gapOrDefault() time.Duration {
	if e.gap > 0 {
		return e.gap
	}
	return DefaultResumeEpisodeGap
}

// endResumed logs the episode once the gap has passed since its last
// resumed send, or waits for that.
func (d *Dispatcher) endResumed() {
	e := &d.resumed
	e.mu.Lock()
	defer e.mu.Unlock()
	if wait := e.gapOrDefault() - time.Since(e.last); wait > 0 {
		time.AfterFunc(wait, d.endResumed)
		return
	}
	flows := slices.Sorted(maps.Keys(e.flows))
	d.logger.Warn(MsgResumed, "deliveries", e.n, "flows", strings.Join(flows, ","), "seconds", e.last.Sub(e.first).Seconds())
	e.open, e.n, e.flows = false, 0, nil
}
