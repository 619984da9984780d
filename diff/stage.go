package diff

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
	gotel "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/stream"
)

// StageName is the diff stage's name, and its default consumer group.
const StageName = "avail-diff"

// instrumentationScope names the meter of this package.
const instrumentationScope = "github.com/dropstream/dropstream/diff"

// Metric names of the diff stage.
const (
	// MetricTransitions counts transitions appended, by kind (open, close)
	// and phase: raw counts raw flips, stable counts stable transitions; a
	// stabilization-1 event, both at once, counts in both. Int64Counter,
	// unit {transition}.
	MetricTransitions = "dropstream.diff.transitions"
	// MetricRuns counts snapshots handled, by status (ok, failed) and
	// applied (true, false). Int64Counter, unit {run}.
	MetricRuns = "dropstream.diff.runs"
	// MetricObservations counts the entities observed by applied OK runs.
	// Int64Counter, unit {observation}.
	MetricObservations = "dropstream.diff.observations"
)

// NewStage returns the "avail-diff" stage: it consumes topics.Snapshots and
// applies each snapshot with Apply, passing the traceparent of the message's
// processing span so the trace continues into the transitions and run
// records. A message that is not an avail.TypeSnapshot, is not valid JSON,
// has a scope key other than its message key, or fails Validate returns a
// stream.Permanent error naming the reason, so it goes to the dead-letter
// stream; Redis errors are returned as they are and retried. Nil fields of
// tel default to the OpenTelemetry globals.
func NewStage(rdb redis.UniversalClient, topics avail.Topics, tel stream.Telemetry) stream.Stage {
	mp := tel.MeterProvider
	if mp == nil {
		mp = gotel.GetMeterProvider()
	}
	h := &handler{rdb: rdb, topics: topics}
	h.counters(mp.Meter(instrumentationScope))
	return stream.Stage{Name: StageName, Topic: topics.Snapshots, Handler: h.handle}
}

// handler is the diff stage's message handler.
type handler struct {
	rdb          redis.UniversalClient
	topics       avail.Topics
	transitions  metric.Int64Counter
	runs         metric.Int64Counter
	observations metric.Int64Counter
	// Option slices built once: [kind open/close][phase raw/stable].
	transOpts [2][2][]metric.AddOption
	runOpts   [2][2][]metric.AddOption // [ok][applied]
}

func (h *handler) counters(meter metric.Meter) {
	h.transitions, _ = meter.Int64Counter(MetricTransitions,
		metric.WithDescription("Transitions appended by the diff stage, by kind and phase."), metric.WithUnit("{transition}"))
	h.observations, _ = meter.Int64Counter(MetricObservations,
		metric.WithDescription("Entities observed by applied runs."), metric.WithUnit("{observation}"))
	h.runs, _ = meter.Int64Counter(MetricRuns,
		metric.WithDescription("Snapshots handled by the diff stage, by status and whether they were applied."), metric.WithUnit("{run}"))
	for i, kind := range []string{avail.KindOpen, avail.KindClose} {
		for j, ph := range []string{"raw", "stable"} {
			h.transOpts[i][j] = []metric.AddOption{metric.WithAttributes(
				attribute.String("kind", kind), attribute.String("phase", ph))}
		}
	}
	for i, status := range []string{avail.StatusFailed, avail.StatusOK} {
		for j, applied := range []bool{false, true} {
			h.runOpts[i][j] = []metric.AddOption{metric.WithAttributes(
				attribute.String("status", status), attribute.Bool("applied", applied))}
		}
	}
}

func (h *handler) handle(ctx context.Context, m *stream.Message) error {
	if m.Type != avail.TypeSnapshot {
		return stream.Permanentf("diff: message type %q, want %q", m.Type, avail.TypeSnapshot)
	}
	snap, err := DecodeSnapshot(m.Key, m.Payload)
	if err != nil {
		return stream.Permanent(err)
	}
	res, err := Apply(ctx, h.rdb, h.topics, snap, traceparentOf(ctx))
	if err != nil {
		if errors.Is(err, ErrInvalidSnapshot) {
			return stream.Permanent(err)
		}
		return err
	}
	h.record(ctx, snap, res)
	return nil
}

// record reports a handled snapshot in metrics and on the processing span.
func (h *handler) record(ctx context.Context, snap avail.Snapshot, res Result) {
	bg := context.Background() // no exemplar per measurement
	ok, applied := 0, 0
	if snap.OK {
		ok = 1
	}
	if res.Applied {
		applied = 1
	}
	h.runs.Add(bg, 1, h.runOpts[ok][applied]...)
	if snap.OK && res.Applied {
		h.observations.Add(bg, int64(len(snap.Entities)))
	}
	for i, n := range [2][2]int{{res.Opened, res.StableOpened}, {res.Closed, res.StableClosed}} {
		for j, c := range n {
			if c > 0 {
				h.transitions.Add(bg, int64(c), h.transOpts[i][j]...)
			}
		}
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attribute.Bool("dropstream.diff.applied", res.Applied),
			attribute.Int("dropstream.diff.opened", res.Opened), attribute.Int("dropstream.diff.closed", res.Closed),
			attribute.Int("dropstream.diff.stable_opened", res.StableOpened),
			attribute.Int("dropstream.diff.stable_closed", res.StableClosed))
	}
}

// traceparentOf returns the W3C traceparent of the span in ctx, or "".
func traceparentOf(ctx context.Context) string {
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c.Get("traceparent")
}
