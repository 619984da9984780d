package main

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/procfs"

	"github.com/dropstream/dropstream/internal/tick"
)

// soakRSSEvery is how often a process's resident set is read between
// samples.
const soakRSSEvery = 10 * time.Second

// rssPeak keeps the largest resident set of a process since the last
// take. One read moves by ±10 % with where the heap is in its GC cycle
// (a collected heap is returned to the OS later); the peak over a
// sampling period is what the process needs, and it does not.
type rssPeak struct {
	mu   sync.Mutex
	peak float64
}

// watch reads the resident set of pid every soakRSSEvery until ctx ends.
// A failed read is skipped: the sample's own read still counts.
func (w *rssPeak) watch(ctx context.Context, pid int) {
	proc, err := procfs.NewProc(pid)
	if err != nil {
		return
	}
	tick.Every(ctx, soakRSSEvery, func() {
		if st, err := proc.Stat(); err == nil {
			w.observe(float64(st.ResidentMemory()))
		}
	})
}

func (w *rssPeak) observe(rss float64) {
	w.mu.Lock()
	w.peak = max(w.peak, rss)
	w.mu.Unlock()
}

// take returns the largest of rss and the reads since the last take, and
// starts a new period.
func (w *rssPeak) take(rss float64) float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	peak := max(w.peak, rss)
	w.peak = 0
	return peak
}
