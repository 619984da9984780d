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
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
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

// Percentile is the p-quantile (0..1) of sorted durations, rounded to 10
// µs; 0 for none.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return Quantile(sorted, p).Round(10 * time.Microsecond)
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

// Micros is d in microseconds.
func Micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
