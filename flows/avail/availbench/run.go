package availbench

import (
	"context"
	"errors"
	"fmt"
	"runtime/pprof"

	"github.com/redis/go-redis/v9"
)

// Targets of the availability pipeline on a 2-core machine.
const (
	TargetObservationsPerSecond = 200_000
	TargetTransitionsPerSecond  = 100_000
	TargetP99Millis             = 50
	TargetBytesPerEntity        = 250
)

// Result is what Run measured.
type Result struct {
	// Entities is Scopes × PerScope.
	Entities int
	// Database is the ClickHouse database the bench wrote to.
	Database string
	// Baseline and Stabilization are the setup runs through the diff stage.
	Baseline, Stabilization Rate
	// MemoryAfterBaseline is Redis memory after the baseline run,
	// MemorySteady after the stabilization run.
	MemoryAfterBaseline, MemorySteady Memory
	// Diff is the observations of the churn runs and the time the diff
	// stage took to apply them: (a).
	Diff Rate
	// Analytics is the churn runs' transitions and the time until they
	// were all counted in ClickHouse: (b).
	Analytics Rate
	// Latency is the end-to-end latency run: (c).
	Latency Latency
}

// Run runs Setup, Diff, Analytics and Latency on rdb (an empty database)
// and cfg.ClickHouseDSN, then cleans up unless cfg.Keep.
func Run(ctx context.Context, rdb redis.UniversalClient, cfg Config) (res Result, err error) {
	if cfg.ClickHouseDSN == "" {
		return res, errors.New("availbench: Run needs a ClickHouse DSN")
	}
	b, err := Open(ctx, rdb, cfg)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, b.Close()) }()
	res.Entities, res.Database = b.Entities(), b.Database()
	// Each phase runs with the pprof label phase=<name>
	// (go tool pprof -tagfocus phase=analytics).
	phases := []struct {
		name string
		run  func(context.Context) error
	}{
		{"setup", func(ctx context.Context) (err error) {
			res.Baseline, res.Stabilization, res.MemoryAfterBaseline, res.MemorySteady, err = b.Setup(ctx)
			return err
		}},
		{"diff", func(ctx context.Context) (err error) { res.Diff, err = b.Diff(ctx, b.cfg.Runs); return err }},
		{"analytics", func(ctx context.Context) (err error) { res.Analytics, err = b.Analytics(ctx); return err }},
		{"latency", func(ctx context.Context) (err error) { res.Latency, err = b.Latency(ctx); return err }},
	}
	for _, ph := range phases {
		pprof.Do(ctx, pprof.Labels("phase", ph.name), func(ctx context.Context) { err = ph.run(ctx) })
		if err != nil {
			return res, fmt.Errorf("availbench: %s: %w", ph.name, err)
		}
	}
	return res, nil
}
