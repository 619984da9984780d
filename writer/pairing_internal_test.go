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

// pairingTestAnalytics returns an Analytics (pairing only) on an embedded
// miniredis and on a real redis-server, by name, keeping pairing state
// cfg.RetainAfterDate after an entity's date.
func pairingTestAnalytics(t *testing.T, cfg AnalyticsConfig) map[string]*Analytics {
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
		out[name] = &Analytics{rdb: rdb, topics: avail.NewTopics(2), met: met, cfg: cfg}
	}
	return out
}

var sessT0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// sessRow is the raw transition row of e; like the diff's, closes carry no
// venue name. Its run_at has sub-millisecond digits, which sessions drop.
func sessRow(entity string, e ev) clickhouse.TransitionRow {
	r := clickhouse.TransitionRow{EntityKey: entity, Kind: e.kind, RunID: fmt.Sprintf("r%02d", e.run), Raw: true,
		RunAt: sessT0.Add(time.Duration(e.run)*time.Minute + 123*time.Microsecond), Date: "2099-03-01"}
	if e.kind == avail.KindOpen {
		r.VenueName = "Chez " + entity
	}
	return r
}

// pairOne pairs the raw transition e of entity alone, as its own batch.
func pairOne(t *testing.T, a *Analytics, entity string, e ev) *clickhouse.SessionRow {
	t.Helper()
	got, err := a.pairSessions(t.Context(), []clickhouse.TransitionRow{sessRow(entity, e)}, []int{0})
	if err != nil {
		t.Fatalf("pairSessions: %v", err)
	}
	switch len(got) {
	case 0:
		return nil
	case 1:
		return &got[0]
	}
	t.Fatalf("one transition wrote %d session rows", len(got))
	return nil
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

// checkSession fails unless s has the id of its open run and the entity's
// venue name, and whole-millisecond times.
func checkSession(t *testing.T, entity string, s *clickhouse.SessionRow) {
	t.Helper()
	if s.SessionID != avail.SessionID(entity, s.OpenRunID) || s.VenueName != "Chez "+entity {
		t.Fatalf("session %+v: id not that of %s, or venue name missing", s, s.OpenRunID)
	}
	if s.OpenedAt.Nanosecond()%int(time.Millisecond) != 0 || s.ClosedAt.Nanosecond()%int(time.Millisecond) != 0 {
		t.Fatalf("session %+v: times not in whole milliseconds", s)
	}
}

func TestPairSessions_pairsOpensAndClosesInOrder(t *testing.T) {
	// A history of more events than maxEvents, newest last.
	var long []ev
	for i := range maxEvents {
		long = append(long, ev{[]string{"open", "close"}[i%2], 10 + i})
	}
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
		{"an event older than the kept ones writes nothing", append(long, ev{"open", 1}),
			append(strings.Split(strings.Repeat("x,", maxEvents), ",")[:maxEvents], "-")},
	}
	for name, a := range pairingTestAnalytics(t, AnalyticsConfig{}) {
		for i, tt := range tests {
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				entity := fmt.Sprintf("in-order-%d", i)
				for j, e := range tt.evs {
					s := pairOne(t, a, entity, e)
					if tt.want[j] == "x" {
						continue // not what this case checks
					}
					if got := describe(s); got != tt.want[j] {
						t.Fatalf("event %d (%v) wrote %q, want %q", j, e, got, tt.want[j])
					}
					if s != nil {
						checkSession(t, entity, s)
					}
				}
			})
		}
	}
}

func TestPairSessions_sameRowsInAnyOrder(t *testing.T) {
	history := []ev{{"open", 1}, {"close", 2}, {"open", 4}, {"close", 7}}
	want := "closed r01-r02 1m0s; closed r04-r07 3m0s"
	for name, a := range pairingTestAnalytics(t, AnalyticsConfig{}) {
		t.Run(name, func(t *testing.T) {
			for i, order := range permutations(history) {
				entity := fmt.Sprintf("any-order-%d", i)
				// Session id → its highest version; the second pass replays
				// every event.
				final := map[string]*clickhouse.SessionRow{}
				for pass := range 2 {
					for _, e := range order {
						s := pairOne(t, a, entity, e)
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

// rawRows returns the raw transition rows of evs for entity, with a stable
// (not raw) row after each open, which pairing must skip.
func rawRows(entity string, evs []ev) ([]clickhouse.TransitionRow, []int) {
	var rows []clickhouse.TransitionRow
	for _, e := range evs {
		r := sessRow(entity, e)
		rows = append(rows, r)
		if e.kind == avail.KindOpen {
			stable := r
			stable.Raw, stable.Stable = false, true
			rows = append(rows, stable)
		}
	}
	return rows, make([]int, len(rows))
}

func TestPairSessions_batchWritesTheRowsOfOneAtATime(t *testing.T) {
	histories := [][]ev{
		{{"open", 1}, {"close", 3}},
		{{"open", 1}, {"open", 1}, {"close", 2}, {"close", 2}},
		{{"open", 1}, {"close", 7}, {"close", 2}, {"open", 4}},
		{{"close", 3}, {"open", 1}},
		{{"close", 2}},
	}
	histories = append(histories, permutations([]ev{{"open", 1}, {"close", 2}, {"open", 4}, {"close", 7}})...)
	for name, a := range pairingTestAnalytics(t, AnalyticsConfig{}) {
		t.Run(name, func(t *testing.T) {
			for i, h := range histories {
				batched, one := fmt.Sprintf("batch-%d", i), fmt.Sprintf("single-%d", i)
				rows, parts := rawRows(batched, h)
				got, err := a.pairSessions(t.Context(), rows, parts)
				if err != nil {
					t.Fatalf("pairSessions: %v", err)
				}
				var want []string
				for _, e := range h {
					if s := pairOne(t, a, one, e); s != nil {
						want = append(want, describe(s))
					}
				}
				var gotDesc []string
				for _, s := range got {
					checkSession(t, batched, &s)
					gotDesc = append(gotDesc, describe(&s))
				}
				if fmt.Sprint(gotDesc) != fmt.Sprint(want) {
					t.Fatalf("history %v: batch wrote %v, one at a time %v", h, gotDesc, want)
				}
			}
		})
	}
}

// TestPairSessions_ordersEntitiesAcrossScriptCalls sends a batch of more
// raw transitions per partition than one script call records, over two
// partitions: each entity's open is in the first call of its partition and
// its close in a later one, and every session is closed.
func TestPairSessions_ordersEntitiesAcrossScriptCalls(t *testing.T) {
	const entities = maxPairPerScript + 10
	for name, a := range pairingTestAnalytics(t, AnalyticsConfig{}) {
		t.Run(name, func(t *testing.T) {
			var rows []clickhouse.TransitionRow
			var parts []int
			for _, kind := range []string{"open", "close"} {
				for i := range entities {
					rows = append(rows, sessRow(fmt.Sprintf("calls-%d", i), ev{kind, 1 + len(rows)/entities}))
					parts = append(parts, i%2)
				}
			}
			got, err := a.pairSessions(t.Context(), rows, parts)
			if err != nil {
				t.Fatalf("pairSessions: %v", err)
			}
			closed := map[string]bool{}
			for _, s := range got {
				if s.Closed {
					if describe(&s) != "closed r01-r02 1m0s" {
						t.Fatalf("session %s of %s, want closed r01-r02 1m0s", describe(&s), s.EntityKey)
					}
					closed[s.EntityKey] = true
				}
			}
			if len(got) != 2*entities || len(closed) != entities {
				t.Fatalf("%d session rows, %d entities closed; want %d rows and all %d closed", len(got), len(closed), 2*entities, entities)
			}
		})
	}
}

// TestPairSessions_stateExpiresAfterItsDate checks the pairing state's
// expiry: RetainAfterDate after the end of the entity's date, kept when
// later events rewrite it, and none when RetainAfterDate is negative.
func TestPairSessions_stateExpiresAfterItsDate(t *testing.T) {
	retain := 48 * time.Hour
	for _, tt := range []struct {
		name   string
		date   string // each case its own, so its own hash
		retain time.Duration
		want   time.Time // zero: no expiry
	}{
		{"dated", "2099-03-01", retain, time.Date(2099, 3, 2, 0, 0, 0, 0, time.UTC).Add(retain)},
		{"kept forever", "2099-04-01", -1, time.Time{}},
	} {
		for name, a := range pairingTestAnalytics(t, AnalyticsConfig{RetainAfterDate: tt.retain}) {
			t.Run(tt.name+"/"+name, func(t *testing.T) {
				key := "ds:" + a.topics.Transitions.HashTag(0) + ":analytics:date:" + tt.date
				for _, e := range []ev{{"open", 1}, {"close", 2}} {
					row := sessRow("expiry", e)
					row.Date = tt.date
					if _, err := a.pairSessions(t.Context(), []clickhouse.TransitionRow{row}, []int{0}); err != nil {
						t.Fatalf("pairSessions: %v", err)
					}
					at, err := a.rdb.PExpireTime(t.Context(), key).Result()
					if err != nil {
						t.Fatal(err)
					}
					// miniredis keeps a relative TTL: its absolute expiry
					// drifts by milliseconds.
					off := at - time.Duration(tt.want.UnixMilli())*time.Millisecond
					if tt.want.IsZero() && at >= 0 || !tt.want.IsZero() && (off < -time.Second || off > time.Second) {
						t.Fatalf("after %v the state expires at %v, want %v", e, time.UnixMilli(at.Milliseconds()).UTC(), tt.want)
					}
				}
			})
		}
	}
}

// TestPairSessions_reloadsFlushedScript empties the script cache of
// servers of the test's own: the pipelined EVALSHAs fail with NOSCRIPT, the
// script is loaded and they run.
func TestPairSessions_reloadsFlushedScript(t *testing.T) {
	met, err := newAnalyticsMetrics(noop.NewMeterProvider())
	if err != nil {
		t.Fatal(err)
	}
	mr := miniredis.RunT(t)
	clients := map[string]redis.UniversalClient{
		"miniredis":    redis.NewClient(&redis.Options{Addr: mr.Addr()}),
		"redis-server": redis.NewClient(&redis.Options{Addr: testenv.StartRedis(t, testenv.RedisConfig{}).Addr()}),
	}
	for name, rdb := range clients {
		t.Run(name, func(t *testing.T) {
			t.Cleanup(func() { rdb.Close() })
			a := &Analytics{rdb: rdb, topics: avail.NewTopics(1), met: met}
			if err := rdb.ScriptFlush(t.Context()).Err(); err != nil {
				t.Fatal(err)
			}
			rows, parts := rawRows("e", []ev{{"open", 1}, {"close", 2}})
			got, err := a.pairSessions(t.Context(), rows, parts)
			if err != nil || len(got) != 2 || describe(&got[1]) != "closed r01-r02 1m0s" {
				t.Fatalf("pairSessions after SCRIPT FLUSH = %+v, %v; want the open and closed rows", got, err)
			}
		})
	}
}

// TestPairSessions_closeGetsTheRecordedVenueName: a close carries no venue
// name; its session row gets the one its entity's last open gave, whatever
// bytes it holds, and a later open's new name replaces it.
func TestPairSessions_closeGetsTheRecordedVenueName(t *testing.T) {
	for name, a := range pairingTestAnalytics(t, AnalyticsConfig{}) {
		t.Run(name, func(t *testing.T) {
			entity := "odd:name\n12:3 x"
			for i, want := range []string{"Chez " + entity, "renamed\n:7"} {
				open, closing := sessRow(entity, ev{"open", 2*i + 1}), sessRow(entity, ev{"close", 2*i + 2})
				open.VenueName = want
				got, err := a.pairSessions(t.Context(), []clickhouse.TransitionRow{open, closing}, []int{0, 0})
				if err != nil {
					t.Fatalf("pairSessions: %v", err)
				}
				if len(got) != 2 || got[1].VenueName != want || !got[1].Closed {
					t.Fatalf("session rows %+v, want the closed row named %q", got, want)
				}
			}
		})
	}
}
