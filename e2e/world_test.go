package e2e

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/clickhouse/clickhousetest"
	"github.com/dropstream/dropstream/collector"
	"github.com/dropstream/dropstream/collector/provider"
	"github.com/dropstream/dropstream/collector/simulator"
	"github.com/dropstream/dropstream/flows/avail/watch"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer"
)

const (
	sourceID = "e2e"
	// simDate is the one simulated date, far enough ahead that the
	// projection's retention (7 days after the date) keeps every entity.
	simDate       = "2031-05-16"
	stabilization = 2
)

// world is the simulated provider, the source polling it, and every poll
// the test made with the truth the simulator held at the time.
type world struct {
	sim      *simulator.Simulator
	src      collector.Source
	venues   []string
	watchers map[string]string     // venue → watcher id
	polls    map[string][]truthRun // scope key → polls in order
	traces   map[string]string     // run id → trace id of its raw run message
}

// newWorld starts a deterministic simulator (no auto-tick) with venues
// venues, one date and party sizes 2 and 4, and builds a source polling
// each (venue, party size) scope.
func newWorld(t *testing.T, venues int) *world {
	t.Helper()
	sim, err := simulator.New(simulator.Config{Seed: 42, Venues: venues, Dates: []string{simDate}, PartySizes: []int{2, 4},
		SlotsPerVenue: 8, OpenFraction: 0.5, Churn: 0.2, Flap: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	url, err := sim.Start(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w := &world{sim: sim, polls: map[string][]truthRun{}, traces: map[string]string{}}
	w.src = collector.Source{ID: sourceID, Provider: provider.Simulator, BaseURL: url,
		Stabilization: stabilization, RateLimit: collector.MaxRateLimit}
	for _, v := range sim.Venues() {
		venue := strconv.FormatInt(v.ID, 10)
		w.venues = append(w.venues, venue)
		for _, party := range sim.Config().PartySizes {
			w.src.Scopes = append(w.src.Scopes, avail.Scope{Venue: venue, Date: simDate, PartySize: party})
		}
	}
	return w
}

// truth returns the slots open now in every scope.
func (w *world) truth() map[string]bool {
	open := map[string]bool{}
	for _, s := range w.src.Scopes {
		for _, k := range w.sim.Open(w.src.Provider, s) {
			open[k] = true
		}
	}
	return open
}

// observe records the runs of the poll just made: it reads the raw runs
// not seen before, expects exactly one per scope, and pairs each with the
// simulator's truth of the current tick and its message's trace id.
func (w *world) observe(t *testing.T, ctx context.Context, rdb redis.UniversalClient, topics avail.Topics) {
	t.Helper()
	fresh := map[string]int{}
	for _, e := range readTopic(t, ctx, rdb, topics.Raw) {
		run := decodeAll[avail.RawRun](t, []entry{e}, avail.TypeRawRun)[0]
		if _, seen := w.traces[run.RunID]; seen {
			continue
		}
		if run.Status != avail.StatusOK || e.traceID == "" {
			t.Fatalf("run %s of %s: status %s (%s), trace id %q", run.RunID, run.ScopeKey, run.Status, run.Error, e.traceID)
		}
		w.traces[run.RunID] = e.traceID
		fresh[run.ScopeKey]++
		w.polls[run.ScopeKey] = append(w.polls[run.ScopeKey], truthRun{runID: run.RunID, at: run.FinishedAt, open: set(w.sim.Open(run.Provider, run.Scope)...)})
	}
	for _, s := range w.src.Scopes {
		if n := fresh[s.Key(sourceID)]; n != 1 {
			t.Fatalf("scope %s: %d new raw runs in this poll, want 1", s.Key(sourceID), n)
		}
	}
}

// expectation is what the pipeline must show after the runs applied.
type expectation struct {
	open, closed map[string]bool     // projection states
	stable       map[string]string   // stable states, of entities with a stable transition
	windows      map[string][]window // raw open windows by entity, oldest first
	deliveries   map[string]delivery // by watcher + " " + event id
	rawOpens     int
	rawCloses    int
	polls        int
}

// expect computes the expectation from the simulator's truths of the runs
// that applied (all when applied is nil): the diff ignores a run older
// than one it already applied, as happens to a run whose handling was
// killed and taken over after newer runs of its scope.
func (w *world) expect(t *testing.T, applied map[string]bool) expectation {
	t.Helper()
	exp := expectation{open: map[string]bool{}, closed: map[string]bool{}, stable: map[string]string{},
		windows: map[string][]window{}, deliveries: map[string]delivery{}}
	for scope, polls := range w.polls {
		exp.polls += len(polls)
		var runs []truthRun
		for _, r := range polls {
			if applied == nil || applied[r.runID] {
				runs = append(runs, r)
			}
		}
		o, c := countRawFlips(runs)
		exp.rawOpens += o
		exp.rawCloses += c
		for _, r := range runs {
			for k := range r.open {
				exp.closed[k] = true
			}
		}
		if len(runs) > 0 {
			for k := range runs[len(runs)-1].open {
				exp.open[k] = true
				delete(exp.closed, k)
			}
		}
		opens, stable := stabilize(runs, stabilization)
		for e, st := range stable {
			exp.stable[e] = st
		}
		for e, ws := range rawWindows(runs) {
			exp.windows[e] = ws
		}
		for _, so := range opens {
			if so.baseline {
				continue
			}
			ent, err := avail.ParseKey(so.entity)
			if err != nil || w.watchers[ent.Venue] == "" {
				t.Fatalf("scope %s: entity %s has no watcher (%v)", scope, so.entity, err)
			}
			d := delivery{watcher: w.watchers[ent.Venue], event: avail.EventID(so.runID, so.entity, avail.KindOpen, true),
				session: avail.SessionID(so.entity, so.sessionRun), entity: so.entity, traceID: w.traces[so.runID]}
			d.headerTraceID = d.traceID
			exp.deliveries[d.watcher+" "+d.event] = d
		}
	}
	return exp
}

// checkAll compares the projection, the diff's output streams, the webhook
// deliveries, ClickHouse and the dead letters with exp.
func (w *world) checkAll(t *testing.T, ctx context.Context, rdb redis.UniversalClient, topics avail.Topics,
	proj *writer.Projection, ch *clickhouse.Client, hook *webhook, exp expectation) {
	t.Helper()
	truth := w.truth()
	if !equalSets(exp.open, truth) {
		t.Fatalf("test bug: expected open set %v is not the simulator's truth %v", sortedKeys(exp.open), sortedKeys(truth))
	}
	diffSets(t, "projection open entities", listKeys(t, ctx, proj, writer.StateOpen), truth)
	diffSets(t, "projection closed entities", listKeys(t, ctx, proj, writer.StateClosed), exp.closed)

	em := readEmitted(t, ctx, rdb, topics)
	if em.rawOpens != exp.rawOpens || em.rawCloses != exp.rawCloses {
		t.Errorf("diff emitted %d raw opens and %d raw closes, the truths give %d and %d", em.rawOpens, em.rawCloses, exp.rawOpens, exp.rawCloses)
	}
	notify := map[string]bool{}
	for _, tr := range em.transitions {
		if tr.Stable && tr.Notify && tr.Kind == avail.KindOpen {
			notify[tr.EventID] = true
		}
	}
	wantNotify := map[string]bool{}
	for _, d := range exp.deliveries {
		wantNotify[d.event] = true
	}
	diffSets(t, "notifying stable opens emitted by the diff", notify, wantNotify)
	if len(em.runIDs) != exp.polls {
		t.Errorf("run records name %d distinct runs, want %d (one per poll)", len(em.runIDs), exp.polls)
	}

	got, bad := hook.deliveries()
	for _, b := range bad {
		t.Errorf("webhook: %s", b)
	}
	checkDeliveries(t, got, exp.deliveries)

	if n, err := clickhouse.CountTransitions(ctx, ch, clickhouse.Filter{}); err != nil || n != uint64(len(em.events)) {
		t.Errorf("ClickHouse transitions = %d (%v), the stream holds %d distinct", n, err, len(em.events))
	}
	if n, err := clickhouse.CountRuns(ctx, ch, clickhouse.Filter{}); err != nil || n != uint64(len(em.runIDs)) {
		t.Errorf("ClickHouse runs = %d (%v), the stream holds %d distinct", n, err, len(em.runIDs))
	}
	want := clickhousetest.SessionCounts{Total: uint64(em.rawOpens), Open: uint64(len(truth)), Closed: uint64(em.rawOpens - len(truth))}
	if got, err := clickhousetest.CountSessions(ctx, ch); err != nil || got != want {
		t.Errorf("ClickHouse sessions = %+v (%v), want %+v (one per raw open; open ones = open slots)", got, err, want)
	}
	dl := stream.NewDeadLetters(rdb)
	for _, topic := range []stream.Topic{topics.Raw, topics.Snapshots, topics.Transitions, topics.Runs} {
		if n, err := dl.Count(ctx, topic); err != nil || n != 0 {
			t.Errorf("%s: %d dead letters (%v), want 0", topic, n, err)
		}
	}
}

// checkDeliveries wants exactly one delivery per expected (watcher, stable
// open), with the session of its open window and the trace of the poll
// that confirmed the opening, in the body and in the traceparent header.
func checkDeliveries(t *testing.T, got []delivery, want map[string]delivery) {
	t.Helper()
	seen := map[string]int{}
	windows := map[string]int{}
	for _, d := range got {
		key := d.watcher + " " + d.event
		seen[key]++
		windows[d.watcher+" "+d.entity+" "+d.session]++
		w, ok := want[key]
		switch {
		case !ok:
			t.Errorf("unexpected delivery %+v", d)
		case seen[key] > 1:
			t.Errorf("delivery %s of %s received %d times", d.event, d.entity, seen[key])
		case d != w:
			t.Errorf("delivery %+v, want %+v", d, w)
		}
		if windows[d.watcher+" "+d.entity+" "+d.session] > 1 {
			t.Errorf("watcher %s notified %d times of one open window %s of %s", d.watcher, windows[d.watcher+" "+d.entity+" "+d.session], d.session, d.entity)
		}
	}
	var missing []string
	for key, d := range want {
		if seen[key] == 0 {
			missing = append(missing, d.entity+" ("+d.event+")")
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 || len(got) != len(want) {
		t.Errorf("%d deliveries, want %d; missing %v", len(got), len(want), missing)
	}
}

func equalSets(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// diffSets reports the keys only in got and only in want.
func diffSets(t *testing.T, what string, got, want map[string]bool) {
	t.Helper()
	var extra, missing []string
	for k := range got {
		if !want[k] {
			extra = append(extra, k)
		}
	}
	for k := range want {
		if !got[k] {
			missing = append(missing, k)
		}
	}
	if len(extra)+len(missing) > 0 {
		sort.Strings(extra)
		sort.Strings(missing)
		t.Errorf("%s: %d, want %d; unexpected %v; missing %v", what, len(got), len(want), extra, missing)
	}
}

// summary describes an expectation for the log.
func (e expectation) summary() string {
	return fmt.Sprintf("%d polls, %d raw opens, %d raw closes, %d open, %d deliveries",
		e.polls, e.rawOpens, e.rawCloses, len(e.open), len(e.deliveries))
}

// newWatchers creates the watchers of w's venues on hook.
func (w *world) newWatchers(t *testing.T, ctx context.Context, rdb redis.UniversalClient, hook *webhook) {
	t.Helper()
	store, err := watch.NewStore(rdb, watch.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	w.watchers = hook.addWatchers(t, ctx, store, w.src.Provider, w.venues)
}
