package writer

import (
	"fmt"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/internal/testenv"
)

// rawRows returns the raw transition rows of evs for entity, with a stable
// (not raw) row after each open, which pairing must skip.
func rawRows(entity string, evs []ev) ([]clickhouse.TransitionRow, []int) {
	var rows []clickhouse.TransitionRow
	for _, e := range evs {
		r := sessRow(entity, e)
		r.Raw = true
		rows = append(rows, r)
		if e.kind == avail.KindOpen {
			stable := r
			stable.Raw, stable.Stable = false, true
			rows = append(rows, stable)
		}
	}
	return rows, make([]int, len(rows))
}

func TestPairSessions_sameRowsAsOneAtATime(t *testing.T) {
	histories := [][]ev{
		{{"open", 1}, {"close", 3}},
		{{"open", 1}, {"open", 1}, {"close", 2}, {"close", 2}},
		{{"open", 1}, {"close", 7}, {"close", 2}, {"open", 4}},
		{{"close", 3}, {"open", 1}},
		{{"close", 2}},
	}
	histories = append(histories, permutations([]ev{{"open", 1}, {"close", 2}, {"open", 4}, {"close", 7}})...)
	for name, a := range sessionTestAnalytics(t) {
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
					s, err := a.session(t.Context(), 0, sessRow(one, e))
					if err != nil {
						t.Fatalf("session: %v", err)
					}
					if s != nil {
						want = append(want, describe(s))
					}
				}
				var gotDesc []string
				for _, s := range got {
					if s.SessionID != avail.SessionID(batched, s.OpenRunID) || s.VenueName != "Chez "+batched {
						t.Fatalf("history %v: session %+v has a wrong id or venue name", h, s)
					}
					gotDesc = append(gotDesc, describe(&s))
				}
				if fmt.Sprint(gotDesc) != fmt.Sprint(want) {
					t.Fatalf("history %v: batch wrote %v, one at a time %v", h, gotDesc, want)
				}
			}
		})
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
