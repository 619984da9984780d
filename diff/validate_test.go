package diff

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/avail"
)

func TestValidate_rejectsWhatCannotBeApplied(t *testing.T) {
	good := snapOf("s", 1, 2, slot("a", "19:00"),
		avail.Entity{Key: avail.RestaurantKey("ot", "r1", "2025-07-04", 4)},
		avail.Entity{Key: avail.SourceKey("src-1")})
	many := good
	many.Entities = make([]avail.Entity, avail.MaxEntities+1)
	tests := []struct {
		name   string
		mutate func(*avail.Snapshot)
		want   string // "" means valid
	}{
		{"valid", func(*avail.Snapshot) {}, ""},
		{"validFailedRun", func(s *avail.Snapshot) { s.OK, s.Entities = false, nil }, ""},
		{"validDuplicateKeys", func(s *avail.Snapshot) { s.Entities = append(s.Entities, s.Entities[0]) }, ""},
		{"validK1", func(s *avail.Snapshot) { s.Stabilization = 1 }, ""},
		{"validK10", func(s *avail.Snapshot) { s.Stabilization = 10 }, ""},
		{"noRunID", func(s *avail.Snapshot) { s.RunID = "" }, "run_id is empty"},
		{"longRunID", func(s *avail.Snapshot) { s.RunID = strings.Repeat("r", avail.MaxIDLen+1) }, "run_id"},
		{"runIDWithNewline", func(s *avail.Snapshot) { s.RunID = "a\nb" }, "control characters"},
		{"noScope", func(s *avail.Snapshot) { s.ScopeKey = "" }, "scope_key is empty"},
		{"scopeNotUTF8", func(s *avail.Snapshot) { s.ScopeKey = "s\xff" }, "scope_key"},
		{"noRunAt", func(s *avail.Snapshot) { s.RunAt = time.Time{} }, "run_at"},
		{"runAtYear10000", func(s *avail.Snapshot) { s.RunAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, "run_at"},
		{"kNegative", func(s *avail.Snapshot) { s.Stabilization = -1 }, "stabilization -1"},
		{"k11", func(s *avail.Snapshot) { s.Stabilization = 11 }, "stabilization 11"},
		{"tooManyEntities", func(s *avail.Snapshot) { *s = many }, "more than"},
		{"keyFourParts", func(s *avail.Snapshot) { s.Entities[0].Key = "resy|v|2025-07-04|19:00" }, "want provider"},
		{"keyEmptyVenue", func(s *avail.Snapshot) { s.Entities[0].Key = "resy||2025-07-04|19:00|2" }, "venue is empty"},
		{"keyParty0", func(s *avail.Snapshot) { s.Entities[0].Key = "resy|v|2025-07-04|19:00|0" }, "party size"},
		{"keyPartyPlus", func(s *avail.Snapshot) { s.Entities[0].Key = "resy|v|2025-07-04|19:00|+2" }, "party size"},
		{"keyBrace", func(s *avail.Snapshot) { s.Entities[0].Key = "resy|{v}|2025-07-04|19:00|2" }, "venue"},
		{"keyNotUTF8", func(s *avail.Snapshot) { s.Entities[0].Key = "resy|v\xff|2025-07-04|19:00|2" }, "UTF-8"},
		{"keyEmptySource", func(s *avail.Snapshot) { s.Entities[0].Key = "source|" }, "source id"},
		{"manyBadKeysCounted", func(s *avail.Snapshot) {
			s.Entities = []avail.Entity{{Key: "x"}, {Key: "y"}, {Key: "z"}, {Key: "w"}, {Key: "v"}}
		}, "5 invalid entity keys"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := good
			s.Entities = append([]avail.Entity(nil), good.Entities...)
			tc.mutate(&s)
			err := Validate(s)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidSnapshot) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: %v, want ErrInvalidSnapshot mentioning %q", err, tc.want)
			}
		})
	}
}

func TestDecodeSnapshot_checksKeyAndJSON(t *testing.T) {
	body, _ := json.Marshal(snapOf("s", 1, 2, slot("a", "19:00")))
	tests := []struct {
		name, key string
		payload   []byte
		want      string
	}{
		{"valid", "s", body, ""},
		{"malformed", "s", []byte(`{"run_id":1`), "decode"},
		{"wrongType", "s", []byte(`{"run_id":1}`), "decode"},
		{"keyMismatch", "t", body, "differs from message key"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeSnapshot(tc.key, tc.payload)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidSnapshot) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("DecodeSnapshot: %v, want ErrInvalidSnapshot mentioning %q", err, tc.want)
			}
		})
	}
}

func TestTraceParent_acceptsOnlyW3C(t *testing.T) {
	tests := []struct{ in, tp, id string }{
		{testTraceParent, testTraceParent, testTraceID},
		{"", "", ""},
		{"01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "", ""},
		{"00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01", "", ""},
		{"00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01", "", ""},
		{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331", "", ""},
		{"00-zzf7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "", ""},
	}
	for _, tc := range tests {
		if tp, id := traceParent(tc.in); tp != tc.tp || id != tc.id {
			t.Errorf("traceParent(%q) = %q, %q; want %q, %q", tc.in, tp, id, tc.tp, tc.id)
		}
	}
}

// FuzzDecodeSnapshot checks that decoding outside input never panics, and
// that whatever it accepts can be applied: the model takes it, its keys
// parse, and its script arguments build.
func FuzzDecodeSnapshot(f *testing.F) {
	good, _ := json.Marshal(snapOf("s", 1, 2, slot("a", "19:00"), avail.Entity{Key: avail.SourceKey("x")}))
	f.Add("s", good)
	f.Add("s", []byte(`{"run_id":"r","scope_key":"s","run_at":"2025-01-01T00:00:00Z","ok":true,"entities":[{"key":"a|b|c|*|2"}]}`))
	f.Add("s", []byte(`{"run_id":"r","scope_key":"s","run_at":"2025-01-01T00:00:00+14:00","ok":false,"stabilization":10}`))
	f.Add("", []byte(`null`))
	f.Add("s", []byte(`{"entities":[{"key":"source|"}]}`))
	topics := avail.NewTopics(8)
	f.Fuzz(func(t *testing.T, key string, payload []byte) {
		snap, err := DecodeSnapshot(key, payload)
		if err != nil {
			if !errors.Is(err, ErrInvalidSnapshot) {
				t.Fatalf("error %v does not wrap ErrInvalidSnapshot", err)
			}
			return
		}
		if snap.ScopeKey != key || snap.RunID == "" || snap.Stabilization < 0 || snap.Stabilization > MaxStabilization {
			t.Fatalf("accepted %+v for key %q", snap, key)
		}
		for _, e := range snap.Entities {
			if _, err := avail.ParseKey(e.Key); err != nil {
				t.Fatalf("accepted entity key %q: %v", e.Key, err)
			}
		}
		if _, _, err := prepare(topics, Input{Snapshot: snap}, false); err != nil {
			t.Fatalf("accepted snapshot does not prepare: %v", err)
		}
		NewModel().Apply(snap, "")
	})
}

// TestValidateEntityKey_fastPathAgrees checks that the allocation-free
// check accepts the common keys and nothing the full check rejects.
func TestValidateEntityKey_fastPathAgrees(t *testing.T) {
	for _, key := range []string{
		avail.SlotKey("resy", "v1", "2025-07-04", "19:00", 2), avail.RestaurantKey("ot", "日本", "2025-07-04", 50),
		avail.SourceKey("src-1"), avail.SlotKey("resy", "v1", "2025-07-04", "19:00", 10),
	} {
		if !plainEntityKey(key) || checkEntityKey(key) != nil {
			t.Errorf("%q: fast %v, full %v; want both to accept", key, plainEntityKey(key), checkEntityKey(key))
		}
	}
	for _, key := range []string{
		"", "|", "a|b|c|d|0", "a|b|c|d|51", "a|b|c|d|05", "a|b|c|d|+5", "a|b|c|d|-1", "a|b|c|d|2x", "a|b|c|d|",
		"a|b|c|d|100", "a|b||d|2", "|b|c|d|2", "a|b|c|d|e|2", "a|b{|c|d|2", "a|b|c\n|d|2", "a|b|c|d\r|2", "a}|b|c|d|2",
		"a|\xff|c|d|2", "source|", "source|a|b", "source|{x}", "source", "x|y", "a|b|c|d|5|",
		"a|" + strings.Repeat("v", avail.MaxFieldLen+1) + "|c|d|2", "source|" + strings.Repeat("s", avail.MaxFieldLen+1),
	} {
		if plainEntityKey(key) && checkEntityKey(key) != nil {
			t.Errorf("%q: the fast path accepts what the full check rejects: %v", key, checkEntityKey(key))
		}
		if (ValidateEntityKey(key) == nil) != (checkEntityKey(key) == nil) {
			t.Errorf("%q: ValidateEntityKey %v, full check %v", key, ValidateEntityKey(key), checkEntityKey(key))
		}
	}
}

func TestObserved_dropsLaterDuplicatesAndKeepsUniqueSnapshotsAsTheyAre(t *testing.T) {
	e := func(keys ...string) []avail.Entity {
		out := make([]avail.Entity, len(keys))
		for i, k := range keys {
			out[i] = avail.Entity{Key: k, VenueName: fmt.Sprint(i)}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		in   []avail.Entity
		want []avail.Entity
		same bool // observed returns the snapshot's own slice
	}{
		{"ascending", e("a", "b", "c"), e("a", "b", "c"), true},
		{"unordered, unique", e("c", "a", "b"), e("c", "a", "b"), true},
		{"equal neighbours", e("a", "a", "b"), []avail.Entity{{Key: "a", VenueName: "0"}, {Key: "b", VenueName: "2"}}, false},
		{"apart", e("b", "a", "b"), []avail.Entity{{Key: "b", VenueName: "0"}, {Key: "a", VenueName: "1"}}, false},
		{"empty", e(), e(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := observed(avail.Snapshot{OK: true, Entities: tc.in})
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("observed %+v, want %+v", got, tc.want)
			}
			if same := len(got) > 0 && &got[0] == &tc.in[0]; same != (tc.same && len(got) > 0) {
				t.Errorf("returned the snapshot's slice: %v, want %v", same, tc.same)
			}
		})
	}
	if got := observed(avail.Snapshot{Entities: e("a")}); got != nil {
		t.Errorf("failed run observed %+v, want nil", got)
	}
}
