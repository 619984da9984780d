package diff

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer/sink"
)

// StageName is the diff stage's name, and its default consumer group.
const StageName = "avail-diff"

// instrumentationScope names the meter of this package.
const instrumentationScope = "github.com/dropstream/dropstream/diff"

// Metric names of the diff stage.
const (
	// MetricTransitions counts transitions appended, by kind and phase (raw,
	// stable; a k = 1 event counts in both). Counter, {transition}.
	MetricTransitions = "dropstream.diff.transitions"
	// MetricRuns counts snapshots handled, by status (ok, failed, held) and
	// applied. Counter, {run}.
	MetricRuns = "dropstream.diff.runs"
	// MetricObservations counts the entities observed by applied OK runs.
	// Int64Counter, unit {observation}.
	MetricObservations = "dropstream.diff.observations"
	// MetricReleaseToNotice is the time from the OK run before an open to
	// its notifying stable open (the availability SLO). Histogram, s.
	MetricReleaseToNotice = "dropstream.availability.release_to_notice"
	// MetricVenueK counts the venues of applied runs by the k per-venue
	// stabilization chose ("1".."10"). Counter, {venue}.
	MetricVenueK = "dropstream.diff.venue_k"
)

// releaseBuckets are MetricReleaseToNotice's bucket bounds, in seconds:
// from bursts of a few seconds to an interval or two of a minute and more.
var releaseBuckets = []float64{1, 2.5, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600}

// NewStage returns the "avail-diff" batch stage over topics.Snapshots: a
// batch is one pipeline of scripts, each scope in order. Invalid messages
// are dead-lettered; a Redis error retries the batch, which is idempotent.
func NewStage(rdb redis.UniversalClient, topics avail.Topics, tel stream.Telemetry, opts ...Option) stream.Stage {
	h := &handler{rdb: rdb, topics: topics}
	for _, o := range opts {
		o(h)
	}
	h.counters(tel.WithDefaults().MeterProvider.Meter(instrumentationScope))
	return stream.Stage{Name: StageName, Topic: topics.Snapshots, BatchHandler: h.handleBatch}
}

// Option changes the diff stage (NewStage).
type Option func(*handler)

// WithGuard sets the stage's false-close guard, which must pass
// Guard.Validate; Guard{} turns it off.
func WithGuard(g Guard) Option { return func(h *handler) { h.guard = g } }

// WithPerVenueK turns per-venue stabilization on with k at most maxK; 0
// leaves it off. It panics on a maxK outside 0..MaxStabilization.
func WithPerVenueK(maxK int) Option {
	if err := validPerVenueMaxK(maxK); err != nil {
		panic(err)
	}
	return func(h *handler) { h.perVenueMaxK = maxK }
}

// handler is the diff stage's batch handler.
type handler struct {
	rdb          redis.UniversalClient
	topics       avail.Topics
	guard        Guard
	perVenueMaxK int
	transitions  metric.Int64Counter
	venueK       metric.Int64Counter
	venueKOpts   [MaxStabilization][]metric.AddOption
	release      metric.Float64Histogram
	runs         metric.Int64Counter
	observations metric.Int64Counter
	// Option slices built once: [kind open/close][phase raw/stable].
	transOpts [2][2][]metric.AddOption
	runOpts   [2][2][]metric.AddOption // [ok][applied]
	heldOpts  []metric.AddOption
}

func (h *handler) counters(meter metric.Meter) {
	h.transitions, _ = meter.Int64Counter(MetricTransitions,
		metric.WithDescription("Transitions appended by the diff stage, by kind and phase."), metric.WithUnit("{transition}"))
	h.observations, _ = meter.Int64Counter(MetricObservations,
		metric.WithDescription("Entities observed by applied runs."), metric.WithUnit("{observation}"))
	h.release, _ = meter.Float64Histogram(MetricReleaseToNotice,
		metric.WithDescription("Release → notice latency, at most: from the last OK run before an opening was first seen to its stable open."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(releaseBuckets...))
	h.venueK, _ = meter.Int64Counter(MetricVenueK,
		metric.WithDescription("Venues looked at by applied runs under per-venue stabilization, by the k chosen for them."), metric.WithUnit("{venue}"))
	for i := range h.venueKOpts {
		h.venueKOpts[i] = []metric.AddOption{metric.WithAttributes(attribute.Int("k", i+1))}
	}
	h.runs, _ = meter.Int64Counter(MetricRuns,
		metric.WithDescription("Snapshots handled by the diff stage, by status and whether they were applied."), metric.WithUnit("{run}"))
	for i, kind := range []string{avail.KindOpen, avail.KindClose} {
		for j, ph := range []string{"raw", "stable"} {
			h.transOpts[i][j] = []metric.AddOption{metric.WithAttributes(
				attribute.String("kind", kind), attribute.String("phase", ph))}
		}
	}
	h.heldOpts = []metric.AddOption{metric.WithAttributes(attribute.String("status", "held"), attribute.Bool("applied", false))}
	for i, status := range []string{avail.StatusFailed, avail.StatusOK} {
		for j, applied := range []bool{false, true} {
			h.runOpts[i][j] = []metric.AddOption{metric.WithAttributes(
				attribute.String("status", status), attribute.Bool("applied", applied))}
		}
	}
}

// decode returns the snapshot of a message, or the permanent error that
// dead-letters it.
func decode(m *stream.Message) (avail.Snapshot, error) {
	if m.Type != avail.TypeSnapshot {
		return avail.Snapshot{}, stream.Permanentf("diff: message type %q, want %q", m.Type, avail.TypeSnapshot)
	}
	snap, err := DecodeSnapshot(m.Key, m.Payload)
	if err != nil {
		return avail.Snapshot{}, stream.Permanent(err)
	}
	return snap, nil
}

func (h *handler) handleBatch(ctx context.Context, msgs []*stream.Message) error {
	errs := make([]error, len(msgs))
	inputs := make([]Input, 0, len(msgs))
	idx := make([]int, 0, len(msgs)) // message of each input
	for i, m := range msgs {
		snap, err := decode(m)
		if err != nil {
			errs[i] = err
			continue
		}
		inputs = append(inputs, Input{Snapshot: snap, TraceParent: traceparentOf(m.Context()), Guard: &h.guard, PerVenueMaxK: h.perVenueMaxK})
		idx = append(idx, i)
	}
	results, err := h.apply(ctx, inputs)
	if errors.Is(err, ErrInvalidSnapshot) {
		// Not expected after decode (which validates); find the culprits.
		results, err = h.applyEach(ctx, inputs, idx, errs)
	}
	if err != nil {
		return sink.Settle(errs, err) // the invalid messages keep their permanent errors
	}
	var total Result
	observed := 0
	for j, res := range results {
		if errs[idx[j]] != nil {
			continue // invalid after all: not applied
		}
		h.record(inputs[j].Snapshot, res)
		total.Opened += res.Opened
		total.Closed += res.Closed
		total.StableOpened += res.StableOpened
		total.StableClosed += res.StableClosed
		if res.Applied && inputs[j].Snapshot.OK {
			observed += len(inputs[j].Snapshot.Entities)
		}
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attribute.Int("dropstream.diff.snapshots", len(inputs)),
			attribute.Int("dropstream.diff.observations", observed),
			attribute.Int("dropstream.diff.opened", total.Opened), attribute.Int("dropstream.diff.closed", total.Closed),
			attribute.Int("dropstream.diff.stable_opened", total.StableOpened),
			attribute.Int("dropstream.diff.stable_closed", total.StableClosed))
	}
	return sink.Settle(errs, nil)
}

// apply applies the inputs in rounds of at most one snapshot per scope: a
// NOSCRIPT retry runs after the others, which could reorder a scope.
func (h *handler) apply(ctx context.Context, inputs []Input) ([]Result, error) {
	var rounds [][]int // indices into inputs
	seen := make(map[string]int, len(inputs))
	for i, in := range inputs {
		r := seen[in.Snapshot.ScopeKey]
		seen[in.Snapshot.ScopeKey] = r + 1
		if r == len(rounds) {
			rounds = append(rounds, make([]int, 0, len(inputs)-i))
		}
		rounds[r] = append(rounds[r], i)
	}
	if len(rounds) == 1 {
		return applyBatch(ctx, h.rdb, h.topics, inputs, true)
	}
	results := make([]Result, len(inputs))
	for _, round := range rounds {
		batch := make([]Input, len(round))
		for j, i := range round {
			batch[j] = inputs[i]
		}
		res, err := applyBatch(ctx, h.rdb, h.topics, batch, true)
		if err != nil {
			return nil, err
		}
		for j, i := range round {
			results[i] = res[j]
		}
	}
	return results, nil
}

// applyEach applies the inputs one by one, giving the invalid ones a
// permanent error in errs at idx.
func (h *handler) applyEach(ctx context.Context, inputs []Input, idx []int, errs []error) ([]Result, error) {
	results := make([]Result, len(inputs))
	for j, in := range inputs {
		rs, err := applyBatch(ctx, h.rdb, h.topics, []Input{in}, false)
		var res Result
		if len(rs) == 1 {
			res = rs[0]
		}
		switch {
		case errors.Is(err, ErrInvalidSnapshot):
			errs[idx[j]] = stream.Permanent(err)
		case err != nil:
			return nil, err
		}
		results[j] = res
	}
	return results, nil
}

// record reports a handled snapshot in metrics.
func (h *handler) record(snap avail.Snapshot, res Result) {
	bg := context.Background() // no exemplar per measurement
	if res.Held {
		h.runs.Add(bg, 1, h.heldOpts...)
		return
	}
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
	if res.Notices > 0 && res.ReleasedAfterMS > 0 {
		lat := max(0, time.Since(time.UnixMilli(res.ReleasedAfterMS)).Seconds())
		opt := metric.WithAttributes(attribute.String("provider", snap.Provider))
		for range res.Notices {
			h.release.Record(bg, lat, opt)
		}
	}
	for i, n := range res.VenueK {
		if n > 0 {
			h.venueK.Add(bg, int64(n), h.venueKOpts[i]...)
		}
	}
	for i, n := range [2][2]int{{res.Opened, res.StableOpened}, {res.Closed, res.StableClosed}} {
		for j, c := range n {
			if c > 0 {
				h.transitions.Add(bg, int64(c), h.transOpts[i][j]...)
			}
		}
	}
}

// traceparentOf returns the W3C traceparent of the span in ctx, or "".
func traceparentOf(ctx context.Context) string {
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c.Get("traceparent")
}
