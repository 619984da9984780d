package sink_test

import (
	"log/slog"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/stream/streamtest"
)

// quiet discards the logs of stages and histories under test.
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
