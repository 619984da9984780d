package collector

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/dropstream/dropstream/internal/tenancy"
)

// Sources returns the collector's sources, with defaults applied, sorted by
// id.
func (c *Collector) Sources() []Source {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := slices.Sorted(maps.Keys(c.sources))
	out := make([]Source, len(ids))
	for i, id := range ids {
		out[i] = c.sources[id].src
	}
	return out
}

// Health returns a source's health as the copies of the collector share it
// (CollectorConfig.Shared), and false when no copy has polled it yet.
func (s *Store) Health(ctx context.Context, id string) (SourceHealth, bool, error) {
	return healthReply(id, s.rdb.HMGet(ctx, healthKey(id), healthFields...))
}

// Delete removes a source, or returns an error wrapping ErrSourceNotFound.
func (s *Store) Delete(ctx context.Context, id string) error {
	return s.DeleteIn(ctx, tenancy.View{All: true}, id)
}

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
