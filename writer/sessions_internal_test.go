package writer

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/internal/testenv"
)

// ev is a raw transition of the session tests: kind and run number.
type ev struct {
	kind string
	run  int
}

func sessionTestAnalytics(t *testing.T) map[string]*Analytics {
	t.Helper()
	met, err := newAnalyticsMetrics(noop.NewMeterProvider())
	if err != nil {
		t.Fatal(err)
	}
	mr := miniredis.RunT(t)
	mini := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	opts, err := redis.ParseURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	srv := redis.NewClient(opts)
	t.Cleanup(func() { mini.Close(); srv.Close() })
	out := map[string]*Analytics{}
	for name, rdb := range map[string]redis.UniversalClient{"miniredis": mini, "redis": srv} {
		out[name] = &Analytics{rdb: rdb, topics: avail.NewTopics(1), met: met}
	}
	return out
}

var sessT0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// sessRow is the transition row of e; like the diff's, closes carry no
// venue name.
func sessRow(entity string, e ev) clickhouse.TransitionRow {
	r := clickhouse.TransitionRow{EntityKey: entity, Kind: e.kind, RunID: fmt.Sprintf("r%02d", e.run),
		RunAt: sessT0.Add(time.Duration(e.run) * time.Minute)}
	if e.kind == avail.KindOpen {
		r.VenueName = "Chez " + entity
	}
	return r
}

// describe renders a session row as "open r01" or "closed r01-r03 2m0s".
func describe(s *clickhouse.SessionRow) string {
	if s == nil {
		return "-"
	}
	if !s.Closed {
		return "open " + s.OpenRunID
	}
	return fmt.Sprintf("closed %s-%s %s", s.OpenRunID, s.CloseRunID, s.Duration)
}

// permutations returns every order of evs.
func permutations(evs []ev) [][]ev {
	if len(evs) <= 1 {
		return [][]ev{evs}
	}
	var out [][]ev
	for i := range evs {
		rest := append(append([]ev(nil), evs[:i]...), evs[i+1:]...)
		for _, p := range permutations(rest) {
			out = append(out, append([]ev{evs[i]}, p...))
		}
	}
	return out
}

func TestSession_pairsOpensAndClosesInOrder(t *testing.T) {
	tests := []struct {
		name string
		evs  []ev
		want []string // per event
	}{
		{"open then close", []ev{{"open", 1}, {"close", 3}}, []string{"open r01", "closed r01-r03 2m0s"}},
		{"reopen", []ev{{"open", 1}, {"close", 2}, {"open", 4}, {"close", 7}},
			[]string{"open r01", "closed r01-r02 1m0s", "open r04", "closed r04-r07 3m0s"}},
		{"duplicates repeat their row", []ev{{"open", 1}, {"open", 1}, {"close", 2}, {"close", 2}},
			[]string{"open r01", "open r01", "closed r01-r02 1m0s", "closed r01-r02 1m0s"}},
		{"open after open starts a session (a close was lost)", []ev{{"open", 1}, {"open", 2}, {"close", 3}},
			[]string{"open r01", "open r02", "closed r02-r03 1m0s"}},
		{"a close learnt late corrects the pairing", []ev{{"open", 1}, {"close", 7}, {"close", 2}, {"open", 4}},
			[]string{"open r01", "closed r01-r07 6m0s", "closed r01-r02 1m0s", "closed r04-r07 3m0s"}},
		{"close with no open", []ev{{"close", 2}}, []string{"-"}},
		{"close before its open", []ev{{"close", 3}, {"open", 1}}, []string{"-", "closed r01-r03 2m0s"}},
	}
	for name, a := range sessionTestAnalytics(t) {
		for i, tt := range tests {
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				entity := fmt.Sprintf("in-order-%d", i)
				for j, e := range tt.evs {
					s, err := a.session(t.Context(), 0, sessRow(entity, e))
					if err != nil {
						t.Fatalf("session: %v", err)
					}
					if got := describe(s); got != tt.want[j] {
						t.Fatalf("event %d (%v) wrote %q, want %q", j, e, got, tt.want[j])
					}
					if s != nil && (s.SessionID != avail.SessionID(entity, s.OpenRunID) || s.VenueName != "Chez "+entity) {
						t.Fatalf("session %+v: id not that of %s, or venue name missing", s, s.OpenRunID)
					}
				}
			})
		}
	}
}

func TestSession_sameRowsInAnyOrder(t *testing.T) {
	history := []ev{{"open", 1}, {"close", 2}, {"open", 4}, {"close", 7}}
	want := "closed r01-r02 1m0s; closed r04-r07 3m0s"
	for name, a := range sessionTestAnalytics(t) {
		t.Run(name, func(t *testing.T) {
			for i, order := range permutations(history) {
				entity := fmt.Sprintf("any-order-%d", i)
				// Session id → its highest version; the second pass replays
				// every event.
				final := map[string]*clickhouse.SessionRow{}
				for pass := range 2 {
					for _, e := range order {
						s, err := a.session(t.Context(), 0, sessRow(entity, e))
						if err != nil {
							t.Fatalf("session: %v", err)
						}
						if s != nil && (final[s.SessionID] == nil || s.Version() >= final[s.SessionID].Version()) {
							final[s.SessionID] = s
						}
					}
					var got []string
					for _, run := range []string{"r01", "r04"} {
						got = append(got, describe(final[avail.SessionID(entity, run)]))
					}
					if strings.Join(got, "; ") != want || len(final) != 2 {
						t.Fatalf("order %v, pass %d gave %v (%d sessions), want %s", order, pass, got, len(final), want)
					}
				}
			}
		})
	}
}
