package otel

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// countingExporter counts the spans it is given.
type countingExporter struct{ spans atomic.Int64 }

func (e *countingExporter) ExportSpans(_ context.Context, s []sdktrace.ReadOnlySpan) error {
	e.spans.Add(int64(len(s)))
	return nil
}
func (*countingExporter) Shutdown(context.Context) error { return nil }

// TestNewSpanProcessor_exportsEverySpanOfAFullQueue ends spans from four
// goroutines into a queue of one span: every span ended is exported, where
// the SDK's default processor drops those that find the queue full.
func TestNewSpanProcessor_exportsEverySpanOfAFullQueue(t *testing.T) {
	clearOTelEnv(t)
	t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "1")
	t.Setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "1")
	exp := &countingExporter{}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(NewSpanProcessor(exp)))
	const goroutines, each = 4, 2000
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range each {
				_, span := tp.Tracer("t").Start(context.Background(), "s")
				span.End()
			}
		})
	}
	wg.Wait()
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := exp.spans.Load(); got != goroutines*each {
		t.Errorf("%d spans exported, want %d", got, goroutines*each)
	}
}
