package memlimit

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestFor_keepsTheBaseUntilTheLiveHeapOutgrowsIt(t *testing.T) {
	for _, tc := range []struct {
		name             string
		base, live, want int64
	}{
		{"idle", Default, 20 << 20, Default},
		{"at a third of the base", Default, Default / 3, Default},
		{"above a third", Default, 64 << 20, 192 << 20},
		{"no heap yet", Default, 0, Default},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := For(tc.base, tc.live); got != tc.want {
				t.Errorf("For(%d, %d) = %d, want %d", tc.base, tc.live, got, tc.want)
			}
		})
	}
}

// The limit follows the live heap up, so a process whose live heap grows
// past the base is not collected without pause.
func TestAdjust_raisesTheLimitWhenTheLiveHeapGrows(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	const base = 8 << 20
	keep := make([][]byte, 0, 64)
	for range 64 {
		keep = append(keep, make([]byte, 1<<20))
	}
	runtime.GC()
	limit := Adjust(base)
	if limit < headroom*64<<20 {
		t.Errorf("limit %d MiB with 64 MiB live, want at least %d MiB", limit>>20, headroom*64)
	}
	if got := debug.SetMemoryLimit(-1); got != limit {
		t.Errorf("the runtime's limit is %d, Adjust returned %d", got, limit)
	}
	runtime.KeepAlive(keep)
	runtime.GC()
	if got := Adjust(base); got >= limit {
		t.Errorf("limit %d MiB after the heap was freed, want below %d MiB", got>>20, limit>>20)
	}
}
