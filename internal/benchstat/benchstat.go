// Package benchstat measures what a bench target reports beside its
// figures: the CPU time of this process and of Redis, the allocations of
// this process, and percentiles of latencies.
package benchstat

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/progress"
)

// ProcessCPU is the CPU time (user and system) this process used so far.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// RedisCPU is the CPU time Redis reports it used (INFO cpu), 0 when it
// cannot tell (a cluster, the embedded Redis).
func RedisCPU(ctx context.Context, rdb redis.UniversalClient) time.Duration {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, _ := strconv.ParseFloat(v, 64)
			total += f
		}
	}
	return time.Duration(total * float64(time.Second))
}

// Allocations counts heap allocations.
type Allocations struct{ Objects, Bytes uint64 }

// Allocated is what this process allocated on the heap so far.
func Allocated() Allocations {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return Allocations{ms.Mallocs, ms.TotalAlloc}
}

// Minus is a's allocations since b.
func (a Allocations) Minus(b Allocations) Allocations {
	return Allocations{a.Objects - b.Objects, a.Bytes - b.Bytes}
}

// WriteHeapProfile writes the allocation profile (pprof's alloc_space and
// alloc_objects samples) to path.
func WriteHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Latencies are the median, 99th percentile and largest of durations.
type Latencies struct {
	P50 time.Duration `json:"p50"`
	P99 time.Duration `json:"p99"`
	Max time.Duration `json:"max"`
}

// Summarize is the Latencies of ds, which it sorts; zero for none.
func Summarize(ds []time.Duration) Latencies {
	if len(ds) == 0 {
		return Latencies{}
	}
	slices.Sort(ds)
	return Latencies{Quantile(ds, 0.50), Quantile(ds, 0.99), ds[len(ds)-1]}
}

// Round is l with each figure rounded to a multiple of m.
func (l Latencies) Round(m time.Duration) Latencies {
	return Latencies{l.P50.Round(m), l.P99.Round(m), l.Max.Round(m)}
}

// String is "p50 …, p99 …, max …".
func (l Latencies) String() string {
	return fmt.Sprintf("p50 %s, p99 %s, max %s", l.P50, l.P99, l.Max)
}

// Quantile is the q-quantile (0..1) of sorted, a non-empty slice: the
// element at index q × len, the last for q = 1.
func Quantile[T any](sorted []T, q float64) T {
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// CPU is CPU time used by this process and by Redis.
type CPU struct{ Process, Redis time.Duration }

// ReadCPU is the CPU this process and Redis used so far (Redis 0 when it
// cannot tell).
func ReadCPU(ctx context.Context, rdb redis.UniversalClient) CPU {
	return CPU{ProcessCPU(), RedisCPU(ctx, rdb)}
}

// PerItem is the CPU used since before, divided by n items; zero for no
// items. The Redis figure is 0 when either reading is.
func (c CPU) PerItem(before CPU, n int) CPU {
	used := CPU{Process: c.Process - before.Process}
	if c.Redis > 0 && before.Redis > 0 {
		used.Redis = c.Redis - before.Redis
	}
	return used.Per(n)
}

// Per is c divided among n items; zero for no items.
func (c CPU) Per(n int) CPU {
	if n <= 0 {
		return CPU{}
	}
	return CPU{c.Process / time.Duration(n), c.Redis / time.Duration(n)}
}

// Plus is c and d added up.
func (c CPU) Plus(d CPU) CPU { return CPU{c.Process + d.Process, c.Redis + d.Redis} }

// String is "P µs in this process, R µs in Redis" with one decimal.
func (c CPU) String() string {
	return fmt.Sprintf("%.1f µs in this process, %.1f µs in Redis", Micros(c.Process), Micros(c.Redis))
}

// Until calls done every interval until it answers true or an error, or
// ctx ends.
func Until(ctx context.Context, every time.Duration, done func() (bool, error)) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if ok, err := done(); ok || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Pace calls send every tick with the next n of total items, as many as
// are due at perSecond, until all went, send fails or ctx ends; ph shows
// the items sent, and ends with them.
func Pace(ctx context.Context, tick time.Duration, perSecond float64, total int, ph *progress.Phase, send func(from, n int) error) error {
	t := time.NewTicker(tick)
	defer t.Stop()
	start := time.Now()
	for sent := 0; sent < total; {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		n := min(total, int(time.Since(start).Seconds()*perSecond)+1) - sent
		if err := send(sent, n); err != nil {
			return err
		}
		sent += n
		ph.Set(int64(sent))
	}
	ph.Done("")
	return nil
}

// Micros is d in microseconds.
func Micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
