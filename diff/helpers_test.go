package diff

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/internal/testenv"
)

// Transition is what the diff stage appends to the transitions stream.
type Transition = avail.Transition

// DefaultGuard is the availability flow's guard: more than 10 closes and
// more than half of the open entities.
var DefaultGuard = Guard{Min: 10, Share: 0.5}

// backend is a Redis the script suite runs against; client returns a
// client on an empty database of the test's own.
type backend struct {
	name   string
	client func(t *testing.T) redis.UniversalClient
}

func backends() []backend {
	return []backend{
		{"miniredis", func(t *testing.T) redis.UniversalClient {
			// miniredis runs Lua in Go, far slower than Redis (the more so
			// under -race on a loaded machine): a large snapshot's script
			// may outlast the client's default 3s read timeout.
			return testenv.Dial(t, "redis://"+miniredis.RunT(t).Addr()+"?read_timeout=60s")
		}},
		{"redis-server", func(t *testing.T) redis.UniversalClient {
			return testenv.Dial(t, testenv.RedisURL(t))
		}},
	}
}

// waitTimeout bounds every wait of the tests.
const waitTimeout = 20 * time.Second

// Test fixtures: a traceparent, its trace id, a base time.
const (
	testTraceParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	testTraceID     = "0af7651916cd43dd8448eb211c80319c"
)

var t0 = time.Date(2025, 7, 1, 18, 0, 0, 123456789, time.UTC)

// slot returns a slot entity with a venue name and attributes.
func slot(venue, hhmm string) avail.Entity {
	return avail.Entity{Key: avail.SlotKey("resy", venue, "2025-07-04", hhmm, 2), Kind: avail.EntitySlot,
		Provider: "resy", Venue: venue, VenueName: "Chez " + venue, Date: "2025-07-04", Time: hhmm, PartySize: 2,
		Attrs: map[string]string{"table": "patio", "note": "<b>&amp; \"quoted\"</b>"}}
}

// snapOf returns an OK snapshot of scope with run i at t0+i minutes.
func snapOf(scope string, i int, k int, entities ...avail.Entity) avail.Snapshot {
	return avail.Snapshot{RunID: fmt.Sprintf("run-%04d", i), SourceID: "src-1", Provider: "resy", ScopeKey: scope,
		RunAt: t0.Add(time.Duration(i) * time.Minute), StartedAt: t0.Add(time.Duration(i)*time.Minute - time.Second),
		OK: true, Entities: entities, Stabilization: k}
}

// entry is one decoded stream entry.
type entry struct {
	fields map[string]string
}

// readStream returns every entry of a stream, oldest first.
func readStream(t testing.TB, rdb redis.UniversalClient, key string) []entry {
	t.Helper()
	xs, err := rdb.XRange(context.Background(), key, "-", "+").Result()
	if err != nil {
		t.Fatalf("xrange %s: %v", key, err)
	}
	out := make([]entry, len(xs))
	for i, x := range xs {
		out[i].fields = map[string]string{}
		for k, v := range x.Values {
			out[i].fields[k], _ = v.(string)
		}
	}
	return out
}

// transitionsOf decodes the transitions stream of a scope's partition,
// checking every entry's stream fields.
func transitionsOf(t testing.TB, rdb redis.UniversalClient, topics avail.Topics, scope string) []Transition {
	t.Helper()
	keys, err := KeysOf(topics, scope)
	if err != nil {
		t.Fatal(err)
	}
	var out []Transition
	for _, e := range readStream(t, rdb, keys.Transitions) {
		if e.fields["key"] != scope {
			continue
		}
		if e.fields["type"] != avail.TypeTransitions {
			t.Errorf("transition entry type %q, want %q", e.fields["type"], avail.TypeTransitions)
		}
		var rt avail.RunTransitions
		if err := json.Unmarshal([]byte(e.fields["payload"]), &rt); err != nil {
			t.Fatalf("decode transitions %s: %v", e.fields["payload"], err)
		}
		trs := rt.Transitions
		if len(trs) == 0 || len(trs) > avail.MaxTransitionsPerMessage || len(e.fields["payload"]) > 33<<10 && len(trs) > 1 {
			t.Errorf("entry of %d transitions in %d bytes, want 1 to %d in about 32 KiB", len(trs), len(e.fields["payload"]), avail.MaxTransitionsPerMessage)
		}
		for _, tr := range trs {
			if tr.RunID != "" || tr.ScopeKey != "" || !tr.RunAt.IsZero() {
				t.Errorf("transition %s repeats its run's fields", tr.EventID)
			}
		}
		out = append(out, rt.Expand()...)
	}
	return out
}

// runsOf decodes the run records of a scope, from both streams (see
// runSources), ordered by run_at, then run id, then applied first: the
// order of applying, but for late runs.
func runsOf(t testing.TB, rdb redis.UniversalClient, topics avail.Topics, scope string) []avail.RunRecord {
	t.Helper()
	alone, with := runSources(t, rdb, topics, scope)
	return sortRuns(append(alone, with...))
}

// sortRuns sorts run records as runsOf returns them.
func sortRuns(rs []avail.RunRecord) []avail.RunRecord {
	slices.SortStableFunc(rs, func(a, b avail.RunRecord) int {
		if c := a.RunAt.Compare(b.RunAt); c != 0 {
			return c
		}
		if c := strings.Compare(a.RunID, b.RunID); c != 0 {
			return c
		}
		switch {
		case a.Applied == b.Applied:
			return 0
		case a.Applied:
			return -1
		}
		return 1
	})
	return rs
}

// runSources returns a scope's run records: alone on the run stream (runs
// that flipped nothing), and with their transitions on the transition
// stream (once per run, though each of its entries carries the record,
// which must be the same), each in stream order.
func runSources(t testing.TB, rdb redis.UniversalClient, topics avail.Topics, scope string) (alone, with []avail.RunRecord) {
	t.Helper()
	keys, err := KeysOf(topics, scope)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range readStream(t, rdb, keys.Transitions) {
		var rt avail.RunTransitions
		if e.fields["key"] != scope || json.Unmarshal([]byte(e.fields["payload"]), &rt) != nil {
			continue
		}
		if n := len(with); n > 0 && with[n-1].RunID == rt.Run.RunID {
			if !reflect.DeepEqual(with[n-1], rt.Run) {
				t.Errorf("entries of run %s carry different records: %+v and %+v", rt.Run.RunID, with[n-1], rt.Run)
			}
			continue
		}
		with = append(with, rt.Run)
	}
	return runsAlone(t, rdb, keys, scope), with
}

// runsAlone decodes the run stream's records of a scope.
func runsAlone(t testing.TB, rdb redis.UniversalClient, keys Keys, scope string) []avail.RunRecord {
	t.Helper()
	var out []avail.RunRecord
	for _, e := range readStream(t, rdb, keys.Runs) {
		if e.fields["key"] != scope {
			continue
		}
		if e.fields["type"] != avail.TypeRun {
			t.Errorf("run entry type %q, want %q", e.fields["type"], avail.TypeRun)
		}
		var r avail.RunRecord
		if err := json.Unmarshal([]byte(e.fields["payload"]), &r); err != nil {
			t.Fatalf("decode run record %s: %v", e.fields["payload"], err)
		}
		out = append(out, r)
	}
	return out
}

// normTime returns tm in UTC (zero stays zero), so times decoded from JSON
// compare equal with reflect.DeepEqual; normTransition, normRun and
// normState apply it to every time of a value.
func normTime(tm time.Time) time.Time {
	if tm.IsZero() {
		return time.Time{}
	}
	return tm.UTC()
}

func normTransition(tr Transition) Transition {
	tr.RunAt, tr.LastSeen = normTime(tr.RunAt), normTime(tr.LastSeen)
	return tr
}

func normRun(r avail.RunRecord) avail.RunRecord {
	r.RunAt, r.StartedAt = normTime(r.RunAt), normTime(r.StartedAt)
	return r
}

func normState(s State) State {
	s.LastRunAt, s.LastOKRunAt = normTime(s.LastRunAt), normTime(s.LastOKRunAt)
	if len(s.Open) == 0 {
		s.Open = nil
	}
	if len(s.Pending) == 0 {
		s.Pending = nil
	}
	if len(s.Flaps) == 0 {
		s.Flaps = nil
	}
	for k, p := range s.Pending {
		p.LastSeen = normTime(p.LastSeen)
		s.Pending[k] = p
	}
	return s
}

// sameTransitions compares two lists as multisets by event id and fields.
func sameTransitions(t testing.TB, what string, got, want []Transition) {
	t.Helper()
	index := func(ts []Transition) map[string][]Transition {
		m := map[string][]Transition{}
		for _, tr := range ts {
			m[tr.EventID] = append(m[tr.EventID], normTransition(tr))
		}
		return m
	}
	g, w := index(got), index(want)
	for id, ws := range w {
		if !reflect.DeepEqual(g[id], ws) {
			t.Errorf("%s: event %s:\n got %+v\nwant %+v", what, id, g[id], ws)
		}
	}
	for id, gs := range g {
		if _, ok := w[id]; !ok {
			t.Errorf("%s: unexpected event %s: %+v", what, id, gs)
		}
	}
}

// describe is a short, readable form of a transition for table tests:
// "<kind> <venue> raw|stable|raw+stable [baseline] [notify]".
func describe(tr Transition) string {
	var b strings.Builder
	b.WriteString(tr.Kind + " " + tr.Entity.Venue + " ")
	switch {
	case tr.Raw && tr.Stable:
		b.WriteString("raw+stable")
	case tr.Stable:
		b.WriteString("stable")
	default:
		b.WriteString("raw")
	}
	if tr.Baseline {
		b.WriteString(" baseline")
	}
	if tr.Notify {
		b.WriteString(" notify")
	}
	return b.String()
}

func describeAll(ts []Transition) []string {
	out := make([]string, 0, len(ts))
	for _, tr := range ts {
		out = append(out, describe(tr))
	}
	slices.Sort(out)
	return out
}
