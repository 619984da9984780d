package collector

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// ScheduledPoll is a poll waiting in the schedule.
type ScheduledPoll struct {
	SourceID string
	ScopeKey string
	// Due is when the poll runs (a rate-limit turn may push it later).
	Due time.Time
}

// Schedule returns the scheduled polls by due time, source and scope; polls
// in flight are not in it.
func (c *Collector) Schedule() []ScheduledPoll {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []ScheduledPoll
	for _, j := range c.jobs {
		st, ok := c.sources[j.source]
		if !ok || st.gen != j.gen || st.health.Paused || j.scope >= len(st.src.Scopes) {
			continue
		}
		out = append(out, ScheduledPoll{SourceID: j.source, ScopeKey: st.src.Scopes[j.scope].Key(j.source), Due: j.due})
	}
	slices.SortFunc(out, func(a, b ScheduledPoll) int {
		return cmp.Or(a.Due.Compare(b.Due), strings.Compare(a.SourceID, b.SourceID), strings.Compare(a.ScopeKey, b.ScopeKey))
	})
	return out
}
