package writer_test

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/stream/streamtest"
)

// backend is a Redis the projection tests run against.
type backend struct {
	name string
	rdb  redis.UniversalClient
}

// backends returns an embedded miniredis and a real redis-server
// (testenv.Backends; the latter named "redis").
func backends(t *testing.T) []backend {
	t.Helper()
	all := testenv.Backends()
	return []backend{{"miniredis", all[0].Client(t)}, {"redis", all[1].Client(t)}}
}

// t0 is the time of run 0; run n is n minutes later.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func runAt(run int) time.Time      { return t0.Add(time.Duration(run) * time.Minute) }
func runID(run int) string         { return fmt.Sprintf("run-%04d", run) }
func scopeKey(venue string) string { return "src|" + venue + "|2099-03-08|2|" }

// slot is an entity of provider resy at venue on 2099-03-08, 19:00, party 2.
func slot(venue string) avail.Entity {
	return avail.Entity{Key: avail.SlotKey("resy", venue, "2099-03-08", "19:00", 2), Kind: avail.EntitySlot,
		Provider: "resy", Venue: venue, VenueName: "Venue " + venue, Date: "2099-03-08", Time: "19:00", PartySize: 2}
}

// transition returns a raw (or stable) transition of e in run.
func transition(e avail.Entity, kind string, run int, stable bool) avail.Transition {
	return avail.Transition{
		EventID: avail.EventID(runID(run), e.Key, kind, stable), Entity: e, ScopeKey: scopeKey(e.Venue),
		SourceID: "src", Kind: kind, Stable: stable, RunID: runID(run), RunAt: runAt(run),
		TraceID: fmt.Sprintf("%032x", run+1),
	}
}

// quiet discards the logs of stages and writers under test.
var quiet = slog.New(slog.DiscardHandler)

// runStages runs one copy of each stage until the test ends.
func runStages(t *testing.T, rdb redis.UniversalClient, stages ...stream.Stage) {
	t.Helper()
	streamtest.RunStages(t, rdb, stream.Telemetry{Logger: quiet}, stages...)
}

// stateOf sums group's counters over topic's partitions.
func stateOf(t *testing.T, rdb redis.UniversalClient, topic stream.Topic, group string) streamtest.GroupState {
	t.Helper()
	return streamtest.GroupStateOf(t, rdb, topic, group)
}
