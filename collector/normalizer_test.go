package collector_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/collector"
	"github.com/dropstream/dropstream/collector/provider"
	"github.com/dropstream/dropstream/collector/simulator"
	"github.com/dropstream/dropstream/collector/simulator/simtest"
	"github.com/dropstream/dropstream/stream"
)

// startNormalizer runs the normalizer stage until the test ends.
func (e *env) startNormalizer() {
	e.t.Helper()
	stage := collector.NewNormalizer(e.topics, e.pub)
	stage.Config = stream.RunnerConfig{Block: 20 * time.Millisecond}
	r, err := stream.NewRunner(e.rdb, stage, e.tel)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("runner: %v", err)
		}
	})
}

func (e *env) snapshots(n int) ([]avail.Snapshot, []*stream.Message) {
	e.t.Helper()
	waitFor(e.t, func() bool { return len(messages(e.t, e.rdb, e.topics.Snapshots)) >= n }, "snapshots")
	msgs := messages(e.t, e.rdb, e.topics.Snapshots)
	if len(msgs) != n {
		e.t.Fatalf("%d snapshots, want %d", len(msgs), n)
	}
	return decodeAll[avail.Snapshot](e.t, msgs), msgs
}

func (e *env) deadLetters(n int) []stream.DeadLetter {
	e.t.Helper()
	dl := stream.NewDeadLetters(e.rdb)
	waitFor(e.t, func() bool {
		c, err := dl.Count(context.Background(), e.topics.Raw)
		return err == nil && c >= int64(n)
	}, "dead letters")
	list, err := dl.List(context.Background(), e.topics.Raw, 100)
	if err != nil || len(list) != n {
		e.t.Fatalf("dead letters %+v, %v; want %d", list, err, n)
	}
	return list
}

func traceID(m *stream.Message) string {
	parts := strings.Split(m.TraceParent, "-")
	if len(parts) != 4 {
		return ""
	}
	return parts[1]
}

func TestNormalizer_snapshotsHoldExactlyTheSimulatorsOpenSlots(t *testing.T) {
	e := newEnv(t, simulator.Config{Seed: 9, Venues: 5, Churn: 0.3, Flap: 0.05}, collector.CollectorConfig{})
	slots := e.source("slots", provider.Resy, scopeA, scopeB, scopeC)
	venues := e.source("venues", provider.OpenTable, scopeA, scopeC)
	venues.RestaurantLevel, venues.Stabilization, venues.NotifyFirstSight = true, 3, true
	e.upsert(slots)
	e.upsert(venues)
	e.startNormalizer()
	truth := map[string][]string{}
	seen := 0
	record := func() {
		for _, sc := range slots.Scopes {
			truth[sc.Key("slots")] = e.sim.Open(provider.Resy, sc)
		}
		for _, sc := range venues.Scopes {
			truth[sc.Key("venues")] = simtest.OpenRestaurants(e.sim.Simulator, provider.OpenTable, sc)
		}
	}
	for round := 1; round <= 3; round++ {
		record()
		for _, id := range []string{"slots", "venues"} {
			if err := e.c.PollOnce(context.Background(), id); err != nil {
				t.Fatal(err)
			}
		}
		snaps, msgs := e.snapshots(5 * round)
		raws := messages(t, e.rdb, e.topics.Raw)
		rawRuns := decodeAll[avail.RawRun](t, raws)
		byRun := map[string]int{}
		for i, r := range rawRuns {
			byRun[r.RunID] = i
		}
		for i, s := range snaps[5*(round-1):] {
			ri, ok := byRun[s.RunID]
			if !ok {
				t.Fatalf("snapshot of unknown run %s", s.RunID)
			}
			raw := rawRuns[ri]
			var got []string
			for _, ent := range s.Entities {
				got = append(got, ent.Key)
			}
			seen += len(got)
			if want := truth[s.ScopeKey]; !s.OK || !slices.Equal(got, want) {
				t.Errorf("round %d, %s: OK %v keys %v, want %v", round, s.ScopeKey, s.OK, got, want)
			}
			if !s.RunAt.Equal(raw.FinishedAt) || !s.StartedAt.Equal(raw.StartedAt) || s.SourceID != raw.SourceID ||
				s.Provider != raw.Provider || s.Stabilization != raw.Stabilization || s.NotifyFirstSight != raw.NotifyFirstSight {
				t.Errorf("snapshot %+v does not carry its run's %+v", s, raw)
			}
			msg := msgs[5*(round-1)+i]
			if msg.Key != s.ScopeKey || msg.Type != avail.TypeSnapshot {
				t.Errorf("snapshot message key %q type %q, want %q %q", msg.Key, msg.Type, s.ScopeKey, avail.TypeSnapshot)
			}
			if tid := traceID(msg); tid == "" || tid != traceID(raws[ri]) {
				t.Errorf("snapshot trace %q, want the run's trace %q", tid, traceID(raws[ri]))
			}
		}
		e.sim.Advance(1)
		e.clock.Advance(time.Minute)
	}
	if seen < 30 {
		t.Errorf("%d entities in all snapshots: too few to prove anything", seen)
	}
}

func TestNormalizer_failedRunBecomesAFailedSnapshot(t *testing.T) {
	e := newEnv(t, simulator.Config{}, collector.CollectorConfig{})
	e.upsert(e.source("s", provider.Resy, scopeA))
	e.sim.Fail(simtest.Failure{Mode: simtest.FailServerError})
	if err := e.c.PollOnce(context.Background(), "s"); err != nil {
		t.Fatal(err)
	}
	e.startNormalizer()
	snaps, _ := e.snapshots(1)
	if s := snaps[0]; s.OK || !strings.Contains(s.Error, "HTTP 500") || len(s.Entities) != 0 || s.RunID != e.runs()[0].RunID {
		t.Errorf("snapshot %+v, want OK false with the run's error", s)
	}
}

func TestNormalizer_malformedAnswerIsAFailedSnapshotNotADeadLetter(t *testing.T) {
	e := newEnv(t, simulator.Config{}, collector.CollectorConfig{})
	e.upsert(e.source("s", provider.Resy, scopeA, scopeB))
	e.sim.Fail(simtest.Failure{Mode: simtest.FailMalformed, Venue: "1002", Times: 1})
	if err := e.c.PollOnce(context.Background(), "s"); err != nil {
		t.Fatal(err)
	}
	e.startNormalizer()
	snaps, _ := e.snapshots(2)
	byScope := map[string]avail.Snapshot{}
	for _, s := range snaps {
		byScope[s.ScopeKey] = s
	}
	if s := byScope[scopeA.Key("s")]; !s.OK {
		t.Errorf("good scope's snapshot %+v, want OK", s)
	}
	if s := byScope[scopeB.Key("s")]; s.OK || s.Error != "malformed" || len(s.Entities) != 0 {
		t.Errorf("malformed scope's snapshot %+v, want not OK with a malformed error", s)
	}
	if n, err := stream.NewDeadLetters(e.rdb).Count(context.Background(), e.topics.Raw); err != nil || n != 0 {
		t.Errorf("%d dead letters, want none: a malformed answer is a failed poll", n)
	}
}

func TestNormalizer_invalidMessagesGoToTheDeadLetterStream(t *testing.T) {
	good := avail.RawRun{RunID: "01ARYZ6S41TSV4RRFFQ69G5FAV", SourceID: "s", Provider: "resy", Scope: scopeA,
		ScopeKey: scopeA.Key("s"), StartedAt: t0, FinishedAt: t0, Status: avail.StatusOK, Body: []byte(`{"results":{"venues":[]}}`)}
	encode := func(edit func(*avail.RawRun)) []byte {
		r := good
		edit(&r)
		b, _ := json.Marshal(r)
		return b
	}
	tests := []struct {
		name, key, typ string
		payload        []byte
		reason         string
	}{
		{"wrong type", good.ScopeKey, "avail.snapshot", encode(func(*avail.RawRun) {}), "message type"},
		{"not JSON", good.ScopeKey, avail.TypeRawRun, []byte("not json"), "decode raw run"},
		{"trailing data", good.ScopeKey, avail.TypeRawRun, append(encode(func(*avail.RawRun) {}), '1'), "data after"},
		{"key mismatch", "other", avail.TypeRawRun, encode(func(*avail.RawRun) {}), "differs from message key"},
		{"unknown provider", good.ScopeKey, avail.TypeRawRun, encode(func(r *avail.RawRun) { r.Provider = "yelp" }), "unknown provider"},
		{"unknown status", good.ScopeKey, avail.TypeRawRun, encode(func(r *avail.RawRun) { r.Status = "maybe" }), "status"},
		{"no run id", good.ScopeKey, avail.TypeRawRun, encode(func(r *avail.RawRun) { r.RunID = "" }), "run id"},
		{"invalid scope", good.ScopeKey, avail.TypeRawRun, encode(func(r *avail.RawRun) { r.Scope.PartySize = 0 }), "party_size"},
		{"scope key of another scope", good.ScopeKey, avail.TypeRawRun, encode(func(r *avail.RawRun) { r.Scope = scopeB }), "not the key"},
		{"opentable body for resy", good.ScopeKey, avail.TypeRawRun, encode(func(r *avail.RawRun) {
			r.Body = []byte(`{"data":{"restaurantSearchV2":{"searchResults":{"restaurants":[]}}}}`)
		}), "results.venues is missing"},
		{"ok run without a body", good.ScopeKey, avail.TypeRawRun, encode(func(r *avail.RawRun) { r.Body = nil }), "empty body"},
	}
	e := newEnv(t, simulator.Config{}, collector.CollectorConfig{})
	for _, tt := range tests {
		m := stream.NewMessage(tt.key, tt.typ, tt.payload)
		m.Metadata = map[string]string{"case": tt.name}
		if err := e.pub.Publish(context.Background(), e.topics.Raw, m); err != nil {
			t.Fatal(err)
		}
	}
	e.startNormalizer()
	reasons := map[string]string{}
	for _, d := range e.deadLetters(len(tests)) {
		reasons[d.Message.Metadata["case"]] = d.Reason
	}
	for _, tt := range tests {
		if !strings.Contains(reasons[tt.name], tt.reason) {
			t.Errorf("%s: reason %q, want one saying %q", tt.name, reasons[tt.name], tt.reason)
		}
	}
	if n := len(messages(t, e.rdb, e.topics.Snapshots)); n != 0 {
		t.Errorf("%d snapshots published from invalid messages", n)
	}
}

func TestNormalize_copiesTheRunAndNeverInventsEntities(t *testing.T) {
	run := avail.RawRun{RunID: "r1", SourceID: "s", Provider: "opentable", Scope: scopeA, ScopeKey: scopeA.Key("s"),
		StartedAt: t0, FinishedAt: t0.Add(time.Second), Status: avail.StatusOK, Stabilization: 4, NotifyFirstSight: true,
		Body: []byte(`{"data":{"restaurantSearchV2":{"searchResults":{"restaurants":[{"restaurantId":1001,"name":"x","availability":{"times":["20:00","19:30"]}}]}}}}`)}
	snap, err := collector.Normalize(run)
	if err != nil {
		t.Fatal(err)
	}
	if !snap.OK || snap.RunAt != run.FinishedAt || snap.Stabilization != 4 || !snap.NotifyFirstSight || len(snap.Entities) != 2 ||
		snap.Entities[0].Key != "opentable|1001|2026-11-21|19:30|2" {
		t.Errorf("snapshot %+v", snap)
	}
	run.Status, run.Error = avail.StatusFailed, ""
	if snap, err := collector.Normalize(run); err != nil || snap.OK || snap.Error == "" || snap.Entities != nil {
		t.Errorf("failed run: %+v, %v; want OK false with an error and no entities", snap, err)
	}
}
