package availbench

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/internal/progress"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

func TestLatency_everyExpectedNotificationArrivesOnce(t *testing.T) {
	ctx := context.Background()
	rdb, err := stream.Dial(ctx, testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	var piped strings.Builder
	b, err := Open(ctx, rdb, Config{Scopes: 20, PerScope: 10, Churn: 0.2, Partitions: 2, Rate: 400,
		LatencyDuration: time.Second, Telemetry: stream.Telemetry{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		Phases: progress.NewWith(&piped, false)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	if _, _, _, _, err := b.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Diff(ctx, 1); err != nil {
		t.Fatal(err)
	}
	lat, err := b.Latency(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lat.Expected == 0 || lat.Received != lat.Expected || lat.Duplicates != 0 {
		t.Errorf("expected %d notifications, received %d and %d duplicates", lat.Expected, lat.Received, lat.Duplicates)
	}
	if lat.P50 <= 0 || lat.P50 > lat.P99 || lat.P99 > lat.Max {
		t.Errorf("quantiles p50 %s, p99 %s, max %s out of order", lat.P50, lat.P99, lat.Max)
	}
	// Piped, each phase is a line at its start and one at its end.
	for _, phase := range []string{"latency: publishing", "latency: notifications"} {
		if n := strings.Count(piped.String(), phase+": "); n != 2 ||
			!strings.Contains(piped.String(), phase+": started") || !strings.Contains(piped.String(), phase+": done") {
			t.Errorf("phase %q: %d lines in %q, want its start and end", phase, n, piped.String())
		}
	}
}
