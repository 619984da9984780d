package comic

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/benchstat"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// roundTrips counts the commands and pipelines a client sends.
type roundTrips struct{ n atomic.Int64 }

func (*roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmd)
	}
}

func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmds)
	}
}

// cost is what a benchmark's ops used since startCost: CPU of this
// process and of Redis, and round trips.
type cost struct {
	rdb           redis.UniversalClient
	rt            *roundTrips
	cpu, redisCPU time.Duration
	trips         int64
}

func startCost(ctx context.Context, rdb redis.UniversalClient, rt *roundTrips) cost {
	c := cost{rdb: rdb, rt: rt, cpu: benchstat.ProcessCPU(), redisCPU: benchstat.RedisCPU(ctx, rdb)}
	c.trips = rt.n.Load()
	return c
}

// report reports the cost per op of b.N ops.
func (c cost) report(ctx context.Context, b *testing.B) {
	trips := c.rt.n.Load() - c.trips
	perOp := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N) }
	b.ReportMetric(perOp(benchstat.ProcessCPU()-c.cpu), "client-cpu-µs/op")
	b.ReportMetric(perOp(benchstat.RedisCPU(ctx, c.rdb)-c.redisCPU), "redis-cpu-µs/op")
	b.ReportMetric(float64(trips)/float64(b.N), "round-trips/op")
}

// okPayments accepts every charge.
type okPayments struct{}

func (okPayments) Charge(context.Context, string, string, int64) error { return nil }
func (okPayments) Refund(context.Context, string, string, int64) error { return nil }

// BenchmarkSales_Purchase buys listed comics one after another on a
// redis-server of its own: a purchase's time, CPU (client and Redis) and
// Redis round trips (the charge answers at once), without a transaction
// id (as most API callers) and with one.
func BenchmarkSales_Purchase(b *testing.B) {
	rdb := testenv.Dial(b, testenv.StartRedis(b, testenv.RedisConfig{}).URL())
	rt := &roundTrips{}
	rdb.AddHook(rt)
	svc, err := NewWith(rdb, Config{Partitions: 2}, okPayments{}, stream.Telemetry{Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	round := 0
	for _, given := range []bool{false, true} {
		b.Run(fmt.Sprintf("txn_given=%v", given), func(b *testing.B) {
			round++
			comics := make([]Comic, b.N)
			for i := range comics {
				comics[i] = comicN(fmt.Sprintf("Bench %d", round), i+1, "DC", false)
			}
			for i := 0; i < len(comics); i += 1000 {
				if _, err := svc.Inventory.AddMany(ctx, comics[i:min(i+1000, len(comics))]); err != nil {
					b.Fatal(err)
				}
			}
			cost := startCost(ctx, rdb, rt)
			b.ResetTimer()
			for i := range b.N {
				txn := ""
				if given {
					txn = fmt.Sprintf("bench-%d-%d", round, i)
				}
				if _, err := svc.Sales.Purchase(ctx, "buyer@example.com", comics[i].ID(), "card", txn, ""); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			cost.report(ctx, b)
		})
	}
}
