package availjson

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	gojson "github.com/goccy/go-json"

	"github.com/dropstream/dropstream/avail"
)

var t0 = time.Date(2025, 7, 4, 18, 30, 0, 123456789, time.UTC)

func entities() []avail.Entity {
	return []avail.Entity{
		{Key: "resy|v1|2025-07-04|19:00|2", Kind: avail.EntitySlot, Provider: "resy", Venue: "v1",
			VenueName: "Café <Ω> & \"bar\"", Date: "2025-07-04", Time: "19:00", PartySize: 2,
			Attrs: map[string]string{"type": "Dining Room", "b": "x\ny", "a": "\u2028"}},
		{Key: "resy|v1|2025-07-04|*|4", Kind: avail.EntityRestaurant, Provider: "resy", Venue: "v1", Date: "2025-07-04", PartySize: 4},
		{Key: "source|s1", Kind: avail.EntitySource, Venue: "s1", Attrs: map[string]string{}},
		{Key: "ot|日本|2025-07-04|20:15|50", Kind: avail.EntitySlot, Provider: "ot", Venue: "日本", VenueName: "\x7f tab\t",
			Date: "2025-07-04", Time: "20:15", PartySize: -3},
	}
}

func snapshots() []avail.Snapshot {
	return []avail.Snapshot{
		{RunID: "run-1", SourceID: "src", Provider: "resy", ScopeKey: "src|v1|2025-07-04|2|", RunAt: t0,
			StartedAt: t0.Add(-time.Second), OK: true, Entities: entities(), Stabilization: 2, NotifyFirstSight: true},
		{RunID: "run-2", ScopeKey: "s", RunAt: t0.In(time.FixedZone("x", 3600)), Error: "boom", Entities: []avail.Entity{}},
		{},
	}
}

func transitions() []avail.Transition {
	var out []avail.Transition
	for i, e := range entities() {
		out = append(out, avail.Transition{EventID: fmt.Sprint("ev", i), Entity: e, ScopeKey: "sc", SourceID: "src",
			Kind: avail.KindOpen, Raw: i%2 == 0, Stable: i > 1, Baseline: i == 3, Notify: i == 2, RunID: "run-1",
			RunAt: t0, LastSeen: t0.Add(-time.Minute), TraceID: "0af7651916cd43dd8448eb211c80319c"})
	}
	out[1].OpenRunID, out[1].OpenedAtMS = "run-0", t0.Add(-time.Hour).UnixMilli()
	return append(out, avail.Transition{})
}

func runRecords() []avail.RunRecord {
	return []avail.RunRecord{
		{RunID: "run-1", SourceID: "src", Provider: "resy", ScopeKey: "src|v1|2025-07-04|2|", StartedAt: t0.Add(-time.Second),
			RunAt: t0, Status: "ok", Observed: 100, Opened: 2, Closed: 1, Applied: true, TraceID: "0af7651916cd43dd8448eb211c80319c"},
		{RunID: "run-2", ScopeKey: "s/<x>", RunAt: t0.In(time.FixedZone("x", 3600)), Status: "failed", Error: "boom \"quoted\"", Observed: -1},
		{},
	}
}

// payloads returns json.Marshal's encodings of the sample values.
func payloads(t *testing.T) (snaps, trs [][]byte) {
	t.Helper()
	for _, s := range snapshots() {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, b)
	}
	for _, tr := range transitions() {
		b, err := json.Marshal(tr)
		if err != nil {
			t.Fatal(err)
		}
		trs = append(trs, b)
	}
	for _, r := range runRecords() {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		trs = append(trs, b)
	}
	return snaps, trs
}

// same checks that UnmarshalSnapshot, UnmarshalTransition, the
// transitions array, UnmarshalRunTransitions and UnmarshalRunRecord agree with json.Unmarshal on data, value and error.
func same(t *testing.T, data []byte) {
	t.Helper()
	agree(t, "snapshot", data, UnmarshalSnapshot)
	agree(t, "transition", data, UnmarshalTransition)
	agree(t, "transitions", data, func(data []byte, t *[]avail.Transition) error {
		return unmarshal(data, t, (*scanner).transitions)
	})
	agree(t, "run transitions", data, UnmarshalRunTransitions)
	agree(t, "run record", data, UnmarshalRunRecord)
}

// agree checks that fast decodes data into a T as json.Unmarshal does,
// value and error.
func agree[T any](t *testing.T, what string, data []byte, fast func([]byte, *T) error) {
	t.Helper()
	var want, got T
	wantErr, gotErr := json.Unmarshal(data, &want), fast(data, &got)
	if fmt.Sprint(wantErr) != fmt.Sprint(gotErr) || !reflect.DeepEqual(want, got) {
		t.Fatalf("%s %q:\njson: %+v, %v\nfast: %+v, %v", what, data, want, wantErr, got, gotErr)
	}
}

// plainPayloads returns json.Marshal's encodings of values whose strings
// need no escapes: the fast path must decode them by itself.
func plainPayloads(t *testing.T) (snaps, trs [][]byte) {
	t.Helper()
	e := avail.Entity{Key: "ot|日本|2025-07-04|20:15|50", Kind: avail.EntitySlot, Provider: "ot", Venue: "日本",
		VenueName: "Café Ω \x7f", Date: "2025-07-04", Time: "20:15", PartySize: -3,
		Attrs: map[string]string{"type": "Dining Room", "b": "", "a": "1"}}
	for _, s := range []avail.Snapshot{snapshots()[2], {RunID: "r", RunAt: t0.In(time.FixedZone("x", 3600)),
		StartedAt: t0, OK: true, Error: "e", Entities: []avail.Entity{e, {Key: "source|s", Attrs: map[string]string{}}},
		Stabilization: 10, NotifyFirstSight: true}} {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, b)
	}
	for _, tr := range []avail.Transition{{}, {EventID: "ev", Entity: e, ScopeKey: "sc", SourceID: "src",
		Kind: avail.KindClose, Raw: true, Stable: true, Baseline: true, Notify: true, RunID: "run-1", RunAt: t0,
		LastSeen: t0.Add(-time.Minute), TraceID: "0af7651916cd43dd8448eb211c80319c", OpenRunID: "run-0",
		OpenedAtMS: t0.Add(-time.Hour).UnixMilli()}} {
		b, err := json.Marshal(tr)
		if err != nil {
			t.Fatal(err)
		}
		trs = append(trs, b)
	}
	return snaps, trs
}

func TestUnmarshal_fastPathDecodesMarshalOutput(t *testing.T) {
	snaps, trs := plainPayloads(t)
	for i, b := range snaps {
		var got avail.Snapshot
		sc := scanner{b: b}
		if !sc.snapshot(&got) || !sc.end() {
			t.Fatalf("snapshot %d %s: fast path refused json.Marshal's output", i, b)
		}
		same(t, b)
	}
	for i, b := range trs {
		var got avail.Transition
		sc := scanner{b: b}
		if !sc.transition(&got) || !sc.end() {
			t.Fatalf("transition %d %s: fast path refused json.Marshal's output", i, b)
		}
		same(t, b)
	}
	for _, b := range [][]byte{[]byte("[]"), []byte("[" + string(trs[1]) + "]"), []byte("[" + string(trs[1]) + "," + string(trs[0]) + "]")} {
		var got []avail.Transition
		sc := scanner{b: b}
		if !sc.transitions(&got) || !sc.end() {
			t.Fatalf("transitions %s: fast path refused json.Marshal's output", b)
		}
		same(t, b)
	}
}

// TestUnmarshalRunRecord_fastPathDecodesMarshalAndScriptOutput decodes run
// records as json.Marshal and the diff script's cjson write them (members
// in any order), on the fast path.
func TestUnmarshalRunRecord_fastPathDecodesMarshalAndScriptOutput(t *testing.T) {
	plain := runRecords()[0]
	marshalled, err := json.Marshal(plain)
	if err != nil {
		t.Fatal(err)
	}
	inputs := [][]byte{marshalled, []byte(`{}`),
		[]byte(`{"applied":false,"closed":0,"observed":100,"run_at":"2025-07-04T18:30:00.123456789Z","provider":"resy",` +
			`"status":"ok","scope_key":"src|v1|2025-07-04|2|","run_id":"run-1","opened":3,"source_id":"src",` +
			`"started_at":"2025-07-04T18:29:59Z","trace_id":"0af7651916cd43dd8448eb211c80319c","error":"e"}`)}
	for _, b := range inputs {
		var got avail.RunRecord
		sc := scanner{b: b}
		if !sc.runRecord(&got) || !sc.end() {
			t.Fatalf("%s: fast path refused it", b)
		}
		same(t, b)
	}
}

func TestUnmarshal_matchesEncodingJSON(t *testing.T) {
	cases := []string{
		``, `null`, `[]`, `{}`, ` { } `, `{}x`, `{"run_id":"a"} {}`, `{"run_id":null}`, `{"RUN_ID":"a"}`,
		`{"run_id":"a","run_id":"b"}`, `{"run_id":"a\u0062"}`, `{"run_id":"a\nb"}`, "{\"run_id\":\"a\xffb\"}",
		`{"unknown":1}`, `{"stabilization":2.0}`, `{"stabilization":1e2}`, `{"stabilization":-0}`,
		`{"stabilization":01}`, `{"stabilization":99999999999999999999}`, `{"stabilization":"2"}`,
		`{"ok":truex}`, `{"ok":tru}`, `{"ok":1}`, `{"run_at":"2025-07-04"}`, `{"run_at":"2025-07-04T10:00:00Z"}`,
		`{"run_at":"2025-07-04T10:00:00+25:00"}`, `{"entities":null}`, `{"entities":[]}`, `{"entities":[{}]}`,
		`{"entities":[{"attrs":{}}]}`, `{"entities":[{"attrs":{"a":"1","a":"2"}}]}`, `{"entities":[{"attrs":null}]}`,
		`{"entities":[{"attrs":{"a":1}}]}`, `{"entities":[{},]}`, `{"entities":[{"key":"k"}`, `{"entity":{"key":"k"}}`,
		`{"entity":{"party_size":-7}}`, `{"entity":null}`, `{"raw":false,"stable":true,"notify":true}`,
		`{"last_seen":"0001-01-01T00:00:00Z","trace_id":""}`, "\t{\n\"kind\" :\r\"open\" }\n",
		`{"applied":true,"observed":3,"opened":1,"closed":0}`, `{"applied":1}`, `{"observed":1.5}`,
		`{"status":"ok","status":"failed"}`, `{"closed":null}`, `{"scope_key":"a\/b"}`,
	}
	for _, c := range cases {
		same(t, []byte(c))
	}
}

// TestUnmarshal_matchesEncodingJSONOnMutations compares every prefix and
// many one-byte changes of payloads with encoding/json.
func TestUnmarshal_matchesEncodingJSONOnMutations(t *testing.T) {
	snaps, trs := plainPayloads(t) // inputs of the fast path, which matter most
	run, err := json.Marshal(runRecords()[0])
	if err != nil {
		t.Fatal(err)
	}
	repl := []byte(`"\{}],:0-.ex` + "\xff")
	for _, b := range [][]byte{snaps[1], trs[1], run} {
		for i := range len(b) {
			same(t, b[:i])
			for _, c := range repl {
				m := append([]byte(nil), b...)
				m[i] = c
				same(t, m)
			}
		}
	}
}

func FuzzUnmarshal(f *testing.F) {
	snaps, trs := payloads(&testing.T{})
	for _, b := range append(snaps, trs...) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) { same(t, data) })
}

func TestAppendEntity_matchesMarshal(t *testing.T) {
	es := entities()
	es = append(es, avail.Entity{}, avail.Entity{Key: "bad\xffutf8", VenueName: strings.Repeat("ä", 20),
		Attrs: map[string]string{"z": "1", "y": "", "x\x01": "<"}})
	for _, e := range es {
		want, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendEntity([]byte("prefix"), e); string(got) != "prefix"+string(want) {
			t.Errorf("AppendEntity(%+v) = %s, want %s", e, got[len("prefix"):], want)
		}
	}
}

func BenchmarkUnmarshalSnapshot(b *testing.B) {
	s := avail.Snapshot{RunID: "v0000001-r000003", SourceID: "bench-src", Provider: "resy",
		ScopeKey: "bench-src|v0000001|2099-07-04|2|", RunAt: t0, StartedAt: t0, OK: true, Stabilization: 2}
	for i := range 100 {
		hhmm := fmt.Sprintf("%02d:%02d", i/12%24, i%12*5)
		s.Entities = append(s.Entities, avail.Entity{Key: avail.SlotKey("resy", "v0000001", "2099-07-04", hhmm, 2),
			Kind: avail.EntitySlot, Provider: "resy", Venue: "v0000001", VenueName: "Restaurant v0000001",
			Date: "2099-07-04", Time: hhmm, PartySize: 2, Attrs: map[string]string{"type": "Dining Room"}})
	}
	data, _ := json.Marshal(s)
	for _, bc := range []struct {
		name string
		f    func([]byte, *avail.Snapshot) error
	}{
		{"encoding-json", func(d []byte, v *avail.Snapshot) error { return json.Unmarshal(d, v) }},
		{"goccy-go-json", func(d []byte, v *avail.Snapshot) error { return gojson.Unmarshal(d, v) }},
		{"availjson", UnmarshalSnapshot},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var v avail.Snapshot
				if err := bc.f(data, &v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkAppendEntity(b *testing.B) {
	e := avail.Entity{Key: "resy|v0000001|2099-07-04|10:05|2", Kind: avail.EntitySlot, Provider: "resy", Venue: "v0000001",
		VenueName: "Restaurant v0000001", Date: "2099-07-04", Time: "10:05", PartySize: 2,
		Attrs: map[string]string{"type": "Dining Room"}}
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("goccy-go-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := gojson.Marshal(e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("availjson", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 512)
		for b.Loop() {
			buf = AppendEntity(buf[:0], e)
		}
	})
}

func TestAppendEntityExtras_holdsWhatTheKeyLacks(t *testing.T) {
	for _, e := range entities() {
		var got struct {
			VenueName string            `json:"venue_name"`
			Attrs     map[string]string `json:"attrs"`
			Other     map[string]any    `json:"-"`
		}
		b := AppendEntityExtras(nil, e)
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		var all map[string]json.RawMessage
		_ = json.Unmarshal(b, &all)
		for k := range all {
			if k != "venue_name" && k != "attrs" {
				t.Errorf("%s: member %q", b, k)
			}
		}
		wantAttrs := e.Attrs
		if len(wantAttrs) == 0 {
			wantAttrs = nil
		}
		if got.VenueName != e.VenueName || !reflect.DeepEqual(got.Attrs, wantAttrs) {
			t.Errorf("%s decodes to %q %v, want %q %v", b, got.VenueName, got.Attrs, e.VenueName, e.Attrs)
		}
	}
}

func TestUnmarshalSnapshot_entitiesWithTheSameAttrsShareOneMap(t *testing.T) {
	same := map[string]string{"type": "Dining Room", "area": "bar"}
	snap := avail.Snapshot{RunID: "r", ScopeKey: "s", RunAt: t0, OK: true, Entities: []avail.Entity{
		{Key: "resy|v|2025-07-04|19:00|2", Attrs: same},
		{Key: "resy|v|2025-07-04|19:15|2", Attrs: same},
		{Key: "resy|v|2025-07-04|19:30|2", Attrs: map[string]string{"type": "Patio"}},
		{Key: "resy|v|2025-07-04|19:45|2", Attrs: map[string]string{"type": "Patio"}},
		{Key: "resy|v|2025-07-04|20:00|2"},
		{Key: "resy|v|2025-07-04|20:15|2", Attrs: map[string]string{"type": "Patio", "area": "bar"}},
	}}
	data, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	var got, want avail.Snapshot
	if err := UnmarshalSnapshot(data, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded\n%+v\nwant\n%+v", got, want)
	}
	es := got.Entities
	shared := func(i, j int) bool {
		return reflect.ValueOf(es[i].Attrs).UnsafePointer() == reflect.ValueOf(es[j].Attrs).UnsafePointer()
	}
	if !shared(0, 1) || !shared(2, 3) {
		t.Error("entities with the same attrs text decoded to different maps")
	}
	if shared(1, 2) || shared(3, 5) {
		t.Error("entities with different attrs share a map")
	}
	if es[4].Attrs != nil {
		t.Errorf("entity without attrs decoded %v", es[4].Attrs)
	}
}
