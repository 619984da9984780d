package sink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric/noop"
	tnoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/dropstream/dropstream/internal/telemetrytest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// errRefused is the error of a flush to a ClickHouse that is not running.
var errRefused = fmt.Errorf("clickhouse: insert: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})

// TestBatcher_deadlineUntilTheSinkAnswersHoldsTheBatch: a handler whose
// deadline passes while ClickHouse does not answer gets a stream.Hold
// error (the runner keeps its batch in hand); while ClickHouse answers
// with an error of its own, a plain retryable one.
func TestBatcher_deadlineUntilTheSinkAnswersHoldsTheBatch(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		wantHold bool
	}{
		{name: "connection refused", err: errRefused, wantHold: true},
		{name: "no answer within the flush timeout", err: fmt.Errorf("insert: %w", context.DeadlineExceeded), wantHold: true},
		{name: "rows refused", err: errors.New("code: 53, message: type mismatch"), wantHold: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := &fakeSink{failures: -1, err: tt.err}
			b := testBatcher(t, Batching{BatchRows: 10, FlushInterval: time.Millisecond, Linger: -1}, sink)
			ctx := newDeadline(t.Context())
			res := make(chan error, 1)
			go func() { res <- b.Add(ctx, 1, 1, 1, true) }()
			testenv.WaitFor(t, 5*time.Second, func() bool { return b.Health().Failures > 0 }, "a failed flush")
			ctx.expire()
			err := <-res
			if err == nil || stream.IsHold(err) != tt.wantHold || !errors.Is(err, tt.err) {
				t.Fatalf("add = %v (held %t), want the flush error, held %t", err, stream.IsHold(err), tt.wantHold)
			}
			if stream.Classify(err) != stream.OutcomeFailed {
				t.Fatalf("add = %v classified %s, want retryable", err, stream.Classify(err))
			}
		})
	}
}

// blockingSink fails while down; otherwise its flushes wait for release.
type blockingSink struct {
	fakeSink
	started chan struct{} // receives when a flush starts
	release chan struct{}
}

func (s *blockingSink) flush(ctx context.Context, items []int) error {
	s.started <- struct{}{}
	<-s.release
	return s.fakeSink.flush(ctx, items)
}

// TestBatcher_deadlineDuringAFlushWaitsForItsOutcome: a handler whose
// deadline passes while the flush holding its rows is under way gets that
// flush's outcome, so rows written are never reported unwritten (and
// written again on redelivery).
func TestBatcher_deadlineDuringAFlushWaitsForItsOutcome(t *testing.T) {
	tests := []struct {
		name     string
		failures int
		wantErr  bool
	}{
		{name: "the flush succeeds", failures: 0},
		{name: "the flush fails", failures: 1, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := &blockingSink{fakeSink: fakeSink{failures: tt.failures, err: errRefused},
				started: make(chan struct{}, 10), release: make(chan struct{})}
			met, err := NewMetrics(noop.NewMeterProvider())
			if err != nil {
				t.Fatal(err)
			}
			b := NewBatcher("test", Batching{BatchRows: 10, FlushInterval: time.Millisecond, FlushTimeout: time.Minute,
				MaxBackoff: time.Hour}, met, slog.New(slog.DiscardHandler), tnoop.NewTracerProvider().Tracer(""), sink.flush)
			t.Cleanup(b.Close)
			ctx, cancel := context.WithCancel(t.Context())
			res := make(chan error, 1)
			go func() { res <- b.Add(ctx, 7, 1, 1, true) }()
			<-sink.started
			cancel() // the handler's deadline, during the flush
			select {
			case err := <-res:
				t.Fatalf("add returned %v while its flush was under way", err)
			default:
			}
			close(sink.release)
			err = <-res
			_, batches := sink.state()
			switch {
			case tt.wantErr && (!stream.IsHold(err) || len(batches) != 0):
				t.Fatalf("add = %v, flushed %v; want a held error and nothing written", err, batches)
			case !tt.wantErr && (err != nil || len(batches) != 1):
				t.Fatalf("add = %v, flushed %v; want nil and the row written once", err, batches)
			}
		})
	}
}

// TestBatcher_outageLogsOnceWhenItStartsAndOnceWhenItEnds: many failed
// flushes of many waiting batches log one warning when the failures start
// and one line when a flush succeeds again, with the failed attempts and
// the held batches, messages and rows; the gauges report the failure for
// the whole of it and clear after.
func TestBatcher_outageLogsOnceWhenItStartsAndOnceWhenItEnds(t *testing.T) {
	const failures, items = 20, 5
	log := &telemetrytest.Logs{}
	sink := &fakeSink{failures: failures, err: errRefused}
	met, err := NewMetrics(noop.NewMeterProvider())
	if err != nil {
		t.Fatal(err)
	}
	b := NewBatcher("notifier-history", Batching{BatchRows: 1000, FlushInterval: time.Millisecond, FlushTimeout: time.Second,
		MaxBackoff: time.Millisecond}, met, slog.New(log), tnoop.NewTracerProvider().Tracer(""), sink.flush)
	t.Cleanup(b.Close)
	var wg sync.WaitGroup
	errs := make([]error, items)
	sawFailing := make(chan Health, 1)
	go func() {
		testenv.WaitFor(t, 10*time.Second, func() bool { return b.Health().Failures >= 2 }, "failed flushes")
		sawFailing <- b.Health()
	}()
	for i := range items {
		wg.Go(func() { errs[i] = b.Add(t.Context(), i, 2, 3, true) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("add %d: %v", i, err)
		}
	}
	during := <-sawFailing
	if during.FailingFor <= 0 || during.Buffered == 0 {
		t.Fatalf("during the outage health = %+v, want failing for > 0 with rows buffered", during)
	}
	if after := b.Health(); after != (Health{}) {
		t.Fatalf("after recovery health = %+v, want zero", after)
	}
	recs := log.Records()
	if len(recs) != 2 {
		t.Fatalf("%d log lines, want 2 (failing, recovered): %v", len(recs), recs)
	}
	start, end := recs[0], recs[1]
	if err, _ := start.Attrs["error"].(error); start.Level != slog.LevelWarn || start.Attrs["stage"] != "notifier-history" ||
		!errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("first line %v, want a warning naming the stage and the error", start)
	}
	if a := end.Attrs; end.Msg != "clickhouse write recovered" || a["failed_attempts"] != int64(failures) ||
		a["held_batches"] != int64(items) || a["held_messages"] != int64(3*items) || a["held_rows"] != int64(2*items) {
		t.Errorf("last line %v, want %d failed attempts and %d batches, %d messages, %d rows held", end, failures, items, 3*items, 2*items)
	}
	if d, ok := end.Attrs["down_for"].(time.Duration); !ok || d <= 0 {
		t.Errorf("last line %v has no down_for duration", end)
	}
}
