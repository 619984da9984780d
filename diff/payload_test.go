package diff

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/avail"
)

// testPayloadsDecode checks, field by field, that the script's entries
// decode with encoding/json into avail.Transition and avail.RunRecord.
func testPayloadsDecode(t *testing.T, rdb redis.UniversalClient) {
	ctx := context.Background()
	topics := avail.NewTopics(4)
	const scope = "src-1|v1|2025-07-04|2|"
	a := slot("a", "19:00")
	rest := avail.Entity{Key: avail.RestaurantKey("resy", "r1", "2025-07-04", 4), Kind: avail.EntityRestaurant,
		Provider: "resy", Venue: "r1", Date: "2025-07-04", PartySize: 4}
	src := avail.Entity{Key: avail.SourceKey("src-1"), Kind: avail.EntitySource, Venue: "src-1"}
	snaps := []avail.Snapshot{
		snapOf(scope, 1, 2, a, rest, src),
		snapOf(scope, 2, 2, a, rest, src),
		snapOf(scope, 3, 2),
		snapOf(scope, 4, 2),
	}
	snaps[0].Error = "" // ok runs carry no error
	for _, s := range snaps {
		if _, err := Apply(ctx, rdb, topics, s, testTraceParent); err != nil {
			t.Fatal(err)
		}
	}
	keys, _ := KeysOf(topics, scope)
	entries := readStream(t, rdb, keys.Transitions)
	if len(entries) != 4 {
		t.Fatalf("%d transition entries, want 4: one per run", len(entries))
	}
	type want struct {
		run                           int
		entity                        avail.Entity
		kind                          string
		raw, stable, baseline, notify bool
		lastSeen                      time.Time
		openRun                       int // the run a raw close ends the session of
	}
	closed := func(e avail.Entity) avail.Entity { p, _ := avail.ParseKey(e.Key); return p }
	named := func(e avail.Entity) avail.Entity { p := closed(e); p.VenueName = e.VenueName; return p }
	seen2 := snaps[1].RunAt
	wants := map[string]want{}
	add := func(w want) {
		wants[avail.EventID(snaps[w.run-1].RunID, w.entity.Key, w.kind, w.stable)] = w
	}
	for _, e := range []avail.Entity{a, rest, src} {
		add(want{run: 1, entity: e, kind: avail.KindOpen, raw: true, baseline: true})
		add(want{run: 2, entity: e, kind: avail.KindOpen, stable: true, baseline: true})
		add(want{run: 3, entity: named(e), kind: avail.KindClose, raw: true, lastSeen: seen2, openRun: 1})
		add(want{run: 4, entity: closed(e), kind: avail.KindClose, stable: true, notify: true, lastSeen: seen2})
	}
	for _, e := range entries {
		if e.fields["key"] != scope || e.fields["type"] != avail.TypeTransitions || e.fields["traceparent"] != testTraceParent {
			t.Errorf("entry fields %v: want key %q, type %q, traceparent %q", e.fields, scope, avail.TypeTransitions, testTraceParent)
		}
		var rt avail.RunTransitions
		if err := json.Unmarshal([]byte(e.fields["payload"]), &rt); err != nil || len(rt.Transitions) != 3 {
			t.Fatalf("decode %s: %d transitions, %v; want the 3 of a run", e.fields["payload"], len(rt.Transitions), err)
		}
		payload := e.fields["payload"]
		for _, tr := range rt.Expand() {
			w, ok := wants[tr.EventID]
			if !ok {
				t.Errorf("unexpected event id %s in %s", tr.EventID, payload)
				continue
			}
			delete(wants, tr.EventID)
			snap := snaps[w.run-1]
			if !reflect.DeepEqual(tr.Entity, w.entity) {
				t.Errorf("%s %s entity %+v, want %+v", tr.Kind, tr.EventID, tr.Entity, w.entity)
			}
			if tr.ScopeKey != scope || tr.SourceID != "src-1" || tr.Kind != w.kind || tr.RunID != snap.RunID ||
				tr.TraceID != testTraceID || tr.Raw != w.raw || tr.Stable != w.stable || tr.Baseline != w.baseline ||
				tr.Notify != w.notify {
				t.Errorf("transition %s:\n got %+v raw=%v\nwant %+v", payload, tr, tr.Raw, w)
			}
			var openRunID string
			var openedAt int64
			if w.openRun > 0 {
				openRunID, openedAt = snaps[w.openRun-1].RunID, snaps[w.openRun-1].RunAt.UnixMilli()
			}
			if tr.OpenRunID != openRunID || tr.OpenedAtMS != openedAt {
				t.Errorf("%s %s: open run %q at %d, want %q at %d", tr.Kind, tr.EventID, tr.OpenRunID, tr.OpenedAtMS, openRunID, openedAt)
			}
			if !tr.RunAt.Equal(snap.RunAt) || !tr.LastSeen.Equal(w.lastSeen) {
				t.Errorf("transition %s: run_at %v last_seen %v, want %v and %v", tr.EventID, tr.RunAt, tr.LastSeen, snap.RunAt, w.lastSeen)
			}
		}
	}
	if len(wants) > 0 {
		t.Errorf("missing transitions: %+v", wants)
	}

	// Every run flipped something: its record came with its transitions.
	if alone := readStream(t, rdb, keys.Runs); len(alone) != 0 {
		t.Fatalf("%d run records on the run stream, want none", len(alone))
	}
	runs := runsOf(t, rdb, topics, scope)
	if len(runs) != len(snaps) {
		t.Fatalf("%d run records, want %d", len(runs), len(snaps))
	}
	for i, r := range runs {
		s := snaps[i]
		want := avail.RunRecord{RunID: s.RunID, SourceID: s.SourceID, Provider: s.Provider, ScopeKey: scope,
			StartedAt: s.StartedAt, RunAt: s.RunAt, Status: avail.StatusOK, Observed: len(s.Entities),
			Opened: []int{3, 0, 0, 0}[i], Closed: []int{0, 0, 3, 0}[i], Applied: true, TraceID: testTraceID}
		if !reflect.DeepEqual(normRun(r), normRun(want)) {
			t.Errorf("run record %d:\n got %+v\nwant %+v", i, r, want)
		}
	}
	// A failed run and its replay: status, error, applied.
	failed := snapOf(scope, 5, 2)
	failed.OK, failed.Error = false, "HTTP 429: slow down"
	for range 2 {
		if _, err := Apply(ctx, rdb, topics, failed, testTraceParent); err != nil {
			t.Fatal(err)
		}
	}
	recs := runsOf(t, rdb, topics, scope)
	for i, r := range recs[len(recs)-2:] {
		if r.Status != avail.StatusFailed || r.Error != failed.Error || r.Applied != (i == 0) || r.Observed != 0 {
			t.Errorf("failed run record %d: %+v", i, r)
		}
	}
}

// testEventIDsMatchGo checks that redis.sha1hex in the script and
// avail.EventID agree, also on multi-byte keys and ids.
func testEventIDsMatchGo(t *testing.T, rdb redis.UniversalClient) {
	topics := avail.NewTopics(3)
	ents := []avail.Entity{slot("café", "19:00"), slot("日本-料理", "07:15"), slot("🍣", "23:59")}
	for i, id := range []string{"run-ascii", "rün-ütf8-€", "1700000000000-0"} {
		snap := snapOf("ids", 1, 1, ents...)
		if i == 1 {
			snap.Entities = nil // close them all, to reopen them next
		}
		snap.RunID = id
		snap.RunAt = snap.RunAt.Add(time.Duration(len(id)) * time.Hour) // each run newer
		if _, err := Apply(context.Background(), rdb, topics, snap, ""); err != nil {
			t.Fatal(err)
		}
	}
	ts := transitionsOf(t, rdb, topics, "ids")
	if len(ts) != 9 {
		t.Fatalf("%d transitions, want 9 (opens, closes, opens)", len(ts))
	}
	for _, tr := range ts {
		if want := avail.EventID(tr.RunID, tr.Entity.Key, tr.Kind, tr.Stable); tr.EventID != want {
			t.Errorf("event id of %s %s in %s: script %s, Go %s", tr.Kind, tr.Entity.Key, tr.RunID, tr.EventID, want)
		}
	}
}

// testWithoutTraceparent checks that an empty or malformed traceparent
// writes no traceparent field and no trace_id.
func testWithoutTraceparent(t *testing.T, rdb redis.UniversalClient) {
	topics := avail.NewTopics(1)
	for i, tp := range []string{"", "garbage", "00-00000000000000000000000000000000-b7ad6b7169203331-01"} {
		if _, err := Apply(context.Background(), rdb, topics, snapOf("nt", i+1, 1, slot(string(rune('a'+i)), "19:00")), tp); err != nil {
			t.Fatal(err)
		}
	}
	keys, _ := KeysOf(topics, "nt")
	for _, k := range []string{keys.Transitions, keys.Runs} {
		for _, e := range readStream(t, rdb, k) {
			if _, ok := e.fields["traceparent"]; ok {
				t.Errorf("%s entry has traceparent: %v", k, e.fields)
			}
			var v struct {
				TraceID *string `json:"trace_id"`
				Run     struct {
					TraceID *string `json:"trace_id"`
				} `json:"run"`
			}
			if err := json.Unmarshal([]byte(e.fields["payload"]), &v); err != nil || v.TraceID != nil || v.Run.TraceID != nil ||
				strings.Contains(e.fields["payload"], "trace_id") {
				t.Errorf("%s payload %s has a trace_id (%v)", k, e.fields["payload"], err)
			}
		}
	}
}

// testEntityArgumentForms checks that an opened entity's payload decodes to
// the entity as observed whichever form entityArgs sends it in: rebuilt from
// the key and the default extras, from the key alone, from the key and
// extras of its own, from the key and an earlier entity's extras, or its
// own JSON when its fields differ from its key.
func testEntityArgumentForms(t *testing.T, rdb redis.UniversalClient) {
	ctx := context.Background()
	topics := avail.NewTopics(2)
	const scope = "src-1|forms|2025-07-04|2|"
	bare := avail.Entity{Key: avail.SlotKey("resy", "v1", "2025-07-04", "18:00", 2), Kind: avail.EntitySlot,
		Provider: "resy", Venue: "v1", Date: "2025-07-04", Time: "18:00", PartySize: 2}
	extra := slot("v1", "19:00")
	same := slot("v1", "20:00") // same venue name and attrs as extra: the default
	odd := slot("v1", "21:00")
	odd.Venue = "not the key's venue"
	rest := avail.Entity{Key: avail.RestaurantKey("resy", "v1", "2025-07-04", 4), Kind: avail.EntityRestaurant,
		Provider: "resy", Venue: "v1", Date: "2025-07-04", PartySize: 4, VenueName: "Chez v1"}
	again := avail.Entity{Key: avail.RestaurantKey("resy", "v1", "2025-07-04", 6), Kind: avail.EntityRestaurant,
		Provider: "resy", Venue: "v1", Date: "2025-07-04", PartySize: 6, VenueName: "Chez v1"} // rest's extras
	ents := []avail.Entity{extra, bare, same, odd, rest, again}
	_, args, err := prepare(topics, Input{Snapshot: snapOf(scope, 1, 1, ents...)}, false)
	if err != nil {
		t.Fatal(err)
	}
	// 17 run arguments, the count, the default, the keys, the overrides.
	str := func(a any) string {
		if b, ok := a.([]byte); ok {
			return string(b)
		}
		return a.(string)
	}
	if n := str(args[17]); n != "6" {
		t.Fatalf("entity count %q, want 6", n)
	}
	if def := str(args[18]); !strings.HasPrefix(def, "+{") || !strings.Contains(def, extra.VenueName) {
		t.Fatalf("default argument %q, want extra's extras", def)
	}
	over := map[string]string{} // key's ARGV index -> first byte of its argument ("" for none)
	for i := 19 + len(ents); i < len(args); i += 2 {
		a := str(args[i+1])
		over[str(args[i])] = a[:min(1, len(a))]
	}
	at := func(j int) string { return fmt.Sprint(20 + j) } // ARGV is 1-based
	want := map[string]string{at(1): "", at(3): "{", at(4): "+", at(5): "="}
	if !reflect.DeepEqual(over, want) {
		t.Fatalf("overrides %q, want %q", over, want)
	}
	for i := 19 + len(ents); i < len(args); i += 2 {
		if str(args[i]) == at(5) && str(args[i+1]) != "="+at(4) {
			t.Fatalf("repeated extras sent as %q, want %q", str(args[i+1]), "="+at(4))
		}
	}
	if _, err := Apply(ctx, rdb, topics, snapOf(scope, 1, 1, ents...), ""); err != nil {
		t.Fatal(err)
	}
	got := map[string]avail.Entity{}
	for _, tr := range transitionsOf(t, rdb, topics, scope) {
		got[tr.Entity.Key] = tr.Entity
	}
	for _, e := range ents {
		if !reflect.DeepEqual(got[e.Key], e) {
			t.Errorf("opened %+v, want %+v", got[e.Key], e)
		}
	}
}
