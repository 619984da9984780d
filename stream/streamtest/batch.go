package streamtest

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// testBatchHandler checks that a BatchHandler's per-message errors settle
// each message on its own: retryable failures come back, permanent ones are
// dead-lettered, drops are acknowledged, and the batch span links the
// producers' spans.
func testBatchHandler(t *testing.T, b Backend) {
	rdb := b.Client(t)
	topic := newTopic(2)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tel := stream.Telemetry{TracerProvider: tp, Propagator: propagation.TraceContext{}}
	const n = 120
	msgs := make([]*stream.Message, n)
	for i := range msgs {
		msgs[i] = stream.NewMessage(keyOf(i, 9), "batch", []byte(strconv.Itoa(i)))
	}
	ctx, root := tp.Tracer("test").Start(context.Background(), "producer")
	if err := stream.NewPublisher(rdb, tel).Publish(ctx, topic, msgs...); err != nil {
		t.Fatal(err)
	}
	root.End()
	var mu sync.Mutex
	calls := map[int]int{}
	ok := map[int]int{}
	var batches []int
	start(t, rdb, stream.Stage{Name: "batch", Topic: topic, Config: fastConfig(),
		BatchHandler: func(_ context.Context, ms []*stream.Message) error {
			mu.Lock()
			defer mu.Unlock()
			batches = append(batches, len(ms))
			errs := make([]error, len(ms))
			for j, m := range ms {
				i, _ := strconv.Atoi(string(m.Payload))
				calls[i]++
				switch {
				case i%10 == 1:
					errs[j] = stream.Permanentf("bad %d", i)
				case i%10 == 2:
					errs[j] = fmt.Errorf("skip: %w", stream.ErrDrop)
				case i%10 == 3 && m.Attempt == 1:
					errs[j] = errFlaky
				default:
					ok[i]++
				}
			}
			return &stream.BatchError{Errs: errs}
		}}, tel)
	testenv.WaitFor(t, waitTimeout, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(ok) == n-n/10*2
	}, "batch stage never handled every good message")
	testenv.WaitFor(t, waitTimeout, func() bool { return deadLetterCount(t, rdb, topic) == n/10 }, "want %d dead letters", n/10)
	waitPending(t, rdb, topic, "batch", 0)
	mu.Lock()
	defer mu.Unlock()
	for i := 0; i < n; i++ {
		want := 1
		if i%10 == 3 {
			want = 2
		}
		if calls[i] != want {
			t.Errorf("message %d handled %d times, want %d", i, calls[i], want)
		}
		if ok[i] > 1 {
			t.Errorf("message %d succeeded %d times", i, ok[i])
		}
	}
	if len(batches) == 0 || batches[0] < 2 {
		t.Errorf("first batch had %v messages; want the handler to get batches", batches)
	}
	linked := false
	for _, s := range rec.Ended() {
		if s.Name() == "process "+topic.String() && len(s.Links()) > 1 {
			for _, l := range s.Links() {
				if l.SpanContext.TraceID() == root.SpanContext().TraceID() {
					linked = true
				}
			}
		}
	}
	if !linked {
		t.Error("no batch span links the producer's trace")
	}
	AssertConserved(t, rdb, topic, "batch")
}
