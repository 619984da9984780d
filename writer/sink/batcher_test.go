package sink

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric/noop"
	tnoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/dropstream/dropstream/internal/testenv"
)

// fakeSink records flushes and fails the first failures of them.
type fakeSink struct {
	mu       sync.Mutex
	failures int
	err      error // what a failure returns; default "clickhouse down"
	calls    int
	batches  [][]int
}

func (s *fakeSink) flush(_ context.Context, items []int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.failures != 0 {
		s.failures--
		if s.err != nil {
			return s.err
		}
		return errors.New("clickhouse down")
	}
	s.batches = append(s.batches, append([]int(nil), items...))
	return nil
}

func (s *fakeSink) state() (calls int, batches [][]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls, append([][]int(nil), s.batches...)
}

func testBatcher(t *testing.T, cfg Batching, sink *fakeSink) *Batcher[int] {
	t.Helper()
	met, err := NewMetrics(noop.NewMeterProvider())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = 10 * time.Millisecond
	}
	if cfg.FlushTimeout == 0 {
		cfg.FlushTimeout = time.Second
	}
	b := NewBatcher("test", cfg, met, slog.New(slog.DiscardHandler), tnoop.NewTracerProvider().Tracer(""), sink.flush)
	t.Cleanup(b.Close)
	return b
}

// addAll adds items concurrently and returns their errors.
func addAll(ctx context.Context, b *Batcher[int], urgent bool, items ...int) []error {
	errs := make([]error, len(items))
	var wg sync.WaitGroup
	for i, it := range items {
		wg.Go(func() { errs[i] = b.Add(ctx, it, 1, 1, urgent) })
	}
	wg.Wait()
	return errs
}

func TestBatcher_flushTriggers(t *testing.T) {
	tests := []struct {
		name      string
		cfg       Batching
		urgent    bool // full batches or redeliveries
		items     int
		failures  int
		maxBatch  int // every flushed batch holds at most this many items
		wantCalls int // 0: do not check
	}{
		// FlushInterval and Linger are an hour: only BatchRows can flush.
		{name: "batch rows", cfg: Batching{BatchRows: 3, FlushInterval: time.Hour, Linger: -1}, items: 6, maxBatch: 3, wantCalls: 2},
		// Only the interval can flush.
		{name: "flush interval", cfg: Batching{BatchRows: 1000, FlushInterval: 20 * time.Millisecond, Linger: -1}, items: 5, maxBatch: 5},
		// Only the linger can flush within the test's lifetime.
		{name: "linger", cfg: Batching{BatchRows: 1000, FlushInterval: time.Hour, Linger: 5 * time.Millisecond}, urgent: true, items: 5, maxBatch: 5},
		{name: "failed flushes are retried", cfg: Batching{BatchRows: 4, FlushInterval: time.Hour, Linger: -1}, items: 4, failures: 2, maxBatch: 4, wantCalls: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := &fakeSink{failures: tt.failures}
			b := testBatcher(t, tt.cfg, sink)
			items := make([]int, tt.items)
			for i := range items {
				items[i] = i
			}
			for i, err := range addAll(t.Context(), b, tt.urgent, items...) {
				if err != nil {
					t.Fatalf("add %d: %v", i, err)
				}
			}
			calls, batches := sink.state()
			seen := map[int]bool{}
			for _, batch := range batches {
				if len(batch) > tt.maxBatch {
					t.Fatalf("batch %v exceeds %d items", batch, tt.maxBatch)
				}
				for _, it := range batch {
					seen[it] = true
				}
			}
			if len(seen) != tt.items || (tt.wantCalls > 0 && calls != tt.wantCalls) {
				t.Fatalf("flushed %v in %d calls, want %d items in %d calls", batches, calls, tt.items, tt.wantCalls)
			}
			if n := b.Health().Buffered; n != 0 {
				t.Fatalf("buffered rows = %d after the flush, want 0", n)
			}
		})
	}
}

func TestBatcher_waiterDeadlineDropsItsRow(t *testing.T) {
	sink := &fakeSink{failures: -1} // always fails
	b := testBatcher(t, Batching{BatchRows: 10, FlushInterval: time.Millisecond, Linger: -1}, sink)
	ctx := newDeadline(t.Context())
	res := make(chan error, 1)
	go func() { res <- b.Add(ctx, 1, 1, 1, true) }()
	// The deadline passes once a flush has failed, however slow the machine.
	testenv.WaitFor(t, 5*time.Second, func() bool { return b.Health().Failures > 0 }, "a failed flush")
	ctx.expire()
	err := <-res
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "clickhouse down") {
		t.Fatalf("add = %v, want the deadline and the last flush error", err)
	}
	testenv.WaitFor(t, 5*time.Second, func() bool { return b.Health().Buffered == 0 },
		"the abandoned row leaves the buffer")
}

// deadline is a context whose deadline passes when the test says so.
type deadline struct {
	context.Context
	done chan struct{}
	once sync.Once
}

func newDeadline(parent context.Context) *deadline {
	return &deadline{Context: parent, done: make(chan struct{})}
}

func (d *deadline) expire()               { d.once.Do(func() { close(d.done) }) }
func (d *deadline) Done() <-chan struct{} { return d.done }

func (d *deadline) Err() error {
	select {
	case <-d.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func TestBatcher_closeFailsWaiters(t *testing.T) {
	sink := &fakeSink{failures: -1}
	b := testBatcher(t, Batching{BatchRows: 10, FlushInterval: time.Millisecond, Linger: -1}, sink)
	res := make(chan error, 1)
	go func() { res <- b.Add(context.Background(), 1, 1, 1, true) }()
	testenv.WaitFor(t, 5*time.Second, func() bool { c, _ := sink.state(); return c > 0 }, "a flush attempt")
	b.Close()
	if err := <-res; !errors.Is(err, ErrClosed) {
		t.Fatalf("waiting add after close = %v, want ErrClosed", err)
	}
	if err := b.Add(context.Background(), 2, 1, 1, true); !errors.Is(err, ErrClosed) {
		t.Fatalf("add after close = %v, want ErrClosed", err)
	}
}

// TestBatcher_lingerWaitsForHandlersInProgress: an item queued while
// another handler is between begin and end is not flushed by Linger alone,
// so both share a flush.
func TestBatcher_lingerWaitsForHandlersInProgress(t *testing.T) {
	sink := &fakeSink{}
	// Linger must outlast the gap between the second end and add below,
	// even on a loaded machine.
	b := testBatcher(t, Batching{BatchRows: 1000, FlushInterval: time.Hour, Linger: 200 * time.Millisecond}, sink)
	b.Begin()
	b.Begin()
	first := make(chan error, 1)
	go func() {
		b.End()
		first <- b.Add(t.Context(), 1, 1, 1, true)
	}()
	testenv.WaitFor(t, 5*time.Second, func() bool { return b.Health().Buffered == 1 }, "the first item queued")
	b.End()
	if err := b.Add(t.Context(), 2, 1, 1, true); err != nil {
		t.Fatalf("add 2: %v", err)
	}
	if err := <-first; err != nil {
		t.Fatalf("add 1: %v", err)
	}
	if _, batches := sink.state(); len(batches) != 1 || len(batches[0]) != 2 {
		t.Fatalf("flushed %v, want both items in one flush", batches)
	}
}

// TestBatcher_lingerWaitsForAnUrgentItem: items of partial batches wait
// for FlushInterval (an hour here), not Linger; an urgent one (a full
// batch) makes Linger flush them all.
func TestBatcher_lingerWaitsForAnUrgentItem(t *testing.T) {
	sink := &fakeSink{}
	b := testBatcher(t, Batching{BatchRows: 1000, FlushInterval: time.Hour, Linger: time.Millisecond}, sink)
	partial := make(chan []error, 1)
	go func() { partial <- addAll(t.Context(), b, false, 1, 2, 3) }()
	testenv.WaitFor(t, 5*time.Second, func() bool { return b.Health().Buffered == 3 }, "three partial batches queued")
	if err := b.Add(t.Context(), 4, 1, 1, true); err != nil {
		t.Fatalf("urgent add: %v", err)
	}
	for i, err := range <-partial {
		if err != nil {
			t.Fatalf("partial add %d: %v", i, err)
		}
	}
	if _, batches := sink.state(); len(batches) != 1 || len(batches[0]) != 4 {
		t.Fatalf("flushed %v, want the four items in one flush", batches)
	}
}

// TestBatcher_backlogTailWaitsTwentyLingersNotTheInterval: after a flush
// that held a full batch, the flush after it goes after Linger; a partial
// batch that missed it — the last read of another partition of the
// backlog — waits 20 Lingers, not FlushInterval (an hour here).
func TestBatcher_backlogTailWaitsTwentyLingersNotTheInterval(t *testing.T) {
	sink := &fakeSink{}
	b := testBatcher(t, Batching{BatchRows: 1000, FlushInterval: time.Hour, Linger: time.Millisecond}, sink)
	if err := b.Add(t.Context(), 1, 1, 1, true); err != nil {
		t.Fatalf("full batch: %v", err)
	}
	if err := b.Add(t.Context(), 2, 1, 1, false); err != nil {
		t.Fatalf("partial batch after the full one: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := b.Add(ctx, 3, 1, 1, false); err != nil {
		t.Fatalf("the tail's last partial batch: %v (it waited for the flush interval)", err)
	}
	if _, batches := sink.state(); !slices.EqualFunc(batches, [][]int{{1}, {2}, {3}}, slices.Equal) {
		t.Fatalf("flushed %v, want [1] [2] [3]", batches)
	}
}
