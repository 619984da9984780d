// Package memlimit keeps a soft memory limit that grows with the live heap,
// so the resident set stays flat under a steady load instead of creeping
// up to the bound GOGC 400 sets (BENCHMARKS.md, "Memory over an hour").
// Growing with the live heap, it never makes the collector run more often
// than GOGC 200 would.
package memlimit

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/dropstream/dropstream/internal/tick"
)

// Default is the soft limit set when GOMEMLIMIT is unset: 96 MiB of Go
// memory (heap, stacks and runtime), about five times the live heap of an
// idle `run`.
const Default = 96 << 20

// headroom is the limit over the live heap: three times lets the heap
// double between collections, as GOGC 200 does.
const headroom = 3

// For returns the limit for a live heap of live bytes: base, or headroom
// times the live heap once that is larger.
func For(base, live int64) int64 {
	return max(base, headroom*live)
}

// Keep sets the limit from base and the live heap now and again every
// interval until ctx ends. It does nothing when GOMEMLIMIT is set: the
// operator's limit stands.
func Keep(ctx context.Context, base int64, every time.Duration) {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		return
	}
	tick.Every(ctx, every, func() { Adjust(base) })
}

// Adjust sets the limit For base and the live heap of the last collection,
// and returns it.
func Adjust(base int64) int64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	var live int64
	if s[0].Value.Kind() == metrics.KindUint64 {
		live = int64(s[0].Value.Uint64())
	}
	limit := For(base, live)
	debug.SetMemoryLimit(limit)
	return limit
}
