package writer_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// backend is a Redis the projection tests run against.
type backend struct {
	name string
	rdb  redis.UniversalClient
}

// backends returns an embedded miniredis and a real redis-server.
func backends(t *testing.T) []backend {
	t.Helper()
	mr := miniredis.RunT(t)
	mini := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { mini.Close() })
	return []backend{{"miniredis", mini}, {"redis", realRedis(t)}}
}

// realRedis returns a client of a database of its own on a real redis-server.
func realRedis(t *testing.T) redis.UniversalClient {
	t.Helper()
	opts, err := redis.ParseURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatalf("redis url: %v", err)
	}
	opts.PoolSize = 64
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { rdb.Close() })
	return rdb
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

// metricsReader returns a MeterProvider and a function collecting its data.
func metricsReader(t *testing.T) (*sdkmetric.MeterProvider, func() metricdata.ResourceMetrics) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return mp, func() metricdata.ResourceMetrics {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatalf("collect metrics: %v", err)
		}
		return rm
	}
}

// findMetric returns the metric called name, or false.
func findMetric(rm metricdata.ResourceMetrics, name string) (metricdata.Metrics, bool) {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m, true
			}
		}
	}
	return metricdata.Metrics{}, false
}

// quiet discards the logs of stages and writers under test.
var quiet = slog.New(slog.DiscardHandler)

// runStages runs one copy of each stage until the test ends.
func runStages(t *testing.T, rdb redis.UniversalClient, stages ...stream.Stage) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, len(stages))
	for _, s := range stages {
		r, err := stream.NewRunner(rdb, s, stream.Telemetry{Logger: quiet})
		if err != nil {
			t.Fatalf("NewRunner %s: %v", s.Name, err)
		}
		go func() {
			defer func() { done <- struct{}{} }()
			if err := r.Run(ctx); err != nil {
				t.Errorf("Run %s: %v", s.Name, err)
			}
		}()
	}
	t.Cleanup(func() {
		cancel()
		for range stages {
			<-done
		}
	})
}
