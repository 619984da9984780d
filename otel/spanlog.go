package otel

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gotel "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TracerProvider is the SDK's tracer provider with a [SpanLog] beside it,
// which records the stream runtime's span per message more cheaply. Both
// sample alike and export to the same exporter and processors.
type TracerProvider struct {
	*sdktrace.TracerProvider
	log *SpanLog
}

// NewTracerProvider returns a provider that samples with sampler, exports
// through exp (nil: nothing) and describes its spans with res (nil: the
// SDK's default resource).
func NewTracerProvider(sampler sdktrace.Sampler, res *resource.Resource, exp sdktrace.SpanExporter) *TracerProvider {
	opts := []sdktrace.TracerProviderOption{sdktrace.WithSampler(sampler)}
	if res == nil {
		res = resource.Default()
	} else {
		opts = append(opts, sdktrace.WithResource(res))
		// What WithResource makes of res.
		res, _ = resource.Merge(resource.Environment(), res)
	}
	if exp != nil {
		exp = &lockedExporter{exp: exp}
		opts = append(opts, sdktrace.WithSpanProcessor(NewSpanProcessor(exp)))
	}
	tp := &TracerProvider{TracerProvider: sdktrace.NewTracerProvider(opts...)}
	tp.log = newSpanLog(tp, sampler, res, exp)
	return tp
}

// SpanLog returns the provider's span log.
func (p *TracerProvider) SpanLog() *SpanLog { return p.log }

// RegisterSpanProcessor adds sp to the SDK's provider and to the span log.
func (p *TracerProvider) RegisterSpanProcessor(sp sdktrace.SpanProcessor) {
	p.TracerProvider.RegisterSpanProcessor(sp)
	p.log.mu.Lock()
	defer p.log.mu.Unlock()
	procs := append(*p.log.procs.Load(), sp)
	p.log.procs.Store(&procs)
}

// Shutdown exports the span log's spans, then shuts the SDK's provider
// down, within ctx.
func (p *TracerProvider) Shutdown(ctx context.Context) error {
	return errors.Join(p.log.shutdown(ctx), p.TracerProvider.Shutdown(ctx))
}

// lockedExporter serializes the calls of the SDK's batch processor and the
// span log, as an exporter may assume one caller.
type lockedExporter struct {
	mu  sync.Mutex
	exp sdktrace.SpanExporter
}

func (e *lockedExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.exp.ExportSpans(ctx, spans)
}

func (e *lockedExporter) Shutdown(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.exp.Shutdown(ctx)
}

// SpanLog records spans without the SDK's span machinery: a span is one
// object, its ended spans wait in one queue for a goroutine exporting them
// in batches, and processors see each span as it ends. The queue holds up
// to OTEL_BSP_MAX_QUEUE_SIZE spans (default DefaultSpanQueue); beyond, a
// span is dropped and counted. Batches follow OTEL_BSP_MAX_EXPORT_BATCH_SIZE,
// OTEL_BSP_SCHEDULE_DELAY and OTEL_BSP_EXPORT_TIMEOUT.
//
// It stays beside the SDK's span because a traced message costs half the CPU
// with it (BENCHMARKS.md, "The span log beside the SDK's span").
type SpanLog struct {
	tp      trace.TracerProvider
	sampler sdktrace.Sampler
	res     *resource.Resource
	exp     sdktrace.SpanExporter
	procs   atomic.Pointer[[]sdktrace.SpanProcessor]

	batch, maxQueue int
	delay, timeout  time.Duration

	mu      sync.Mutex
	queue   []sdktrace.ReadOnlySpan // ended, to export
	dropped int64
	closed  bool
	wake    chan struct{}
	flush   chan chan struct{}
	done    chan struct{}
}

func newSpanLog(tp trace.TracerProvider, sampler sdktrace.Sampler, res *resource.Resource, exp sdktrace.SpanExporter) *SpanLog {
	l := &SpanLog{tp: tp, sampler: sampler, res: res, exp: exp, batch: envInt("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512),
		maxQueue: envInt("OTEL_BSP_MAX_QUEUE_SIZE", DefaultSpanQueue),
		delay:    time.Duration(envInt("OTEL_BSP_SCHEDULE_DELAY", 5000)) * time.Millisecond,
		timeout:  time.Duration(envInt("OTEL_BSP_EXPORT_TIMEOUT", 30000)) * time.Millisecond,
		wake:     make(chan struct{}, 1), flush: make(chan chan struct{}), done: make(chan struct{})}
	l.procs.Store(&[]sdktrace.SpanProcessor{})
	if exp == nil {
		close(l.done)
	} else {
		go l.run()
	}
	return l
}

// envInt is the positive integer in the environment variable name, or def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// run exports the queue whenever it holds a batch, every delay, on a
// flush, and at the end.
func (l *SpanLog) run() {
	defer close(l.done)
	tick := time.NewTicker(l.delay)
	defer tick.Stop()
	var spare []sdktrace.ReadOnlySpan
	for {
		var flushed chan struct{}
		select {
		case <-l.wake:
		case <-tick.C:
		case flushed = <-l.flush:
		}
		l.mu.Lock()
		spans, closed := l.queue, l.closed
		l.queue = spare[:0]
		l.mu.Unlock()
		for batch := range slices.Chunk(spans, l.batch) {
			ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
			if err := l.exp.ExportSpans(ctx, batch); err != nil {
				gotel.Handle(fmt.Errorf("otel: export %d spans: %w", len(batch), err))
			}
			cancel()
		}
		clear(spans)
		spare = spans[:0]
		if flushed != nil {
			close(flushed)
		}
		if closed {
			return
		}
	}
}

// shutdown exports the queued spans and stops the exporting goroutine,
// waiting at most until ctx is done.
func (l *SpanLog) shutdown(ctx context.Context) error {
	l.mu.Lock()
	wasClosed := l.closed
	l.closed = true
	l.mu.Unlock()
	if !wasClosed && l.exp != nil {
		select {
		case l.flush <- make(chan struct{}):
		case <-l.done:
		case <-ctx.Done():
		}
	}
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("otel: span log shutdown: %w", ctx.Err())
	}
}

// end queues s for export and hands it to the processors.
func (l *SpanLog) end(s *Span) {
	for _, p := range *l.procs.Load() {
		p.OnEnd(s)
	}
	if l.exp == nil || !s.sc.IsSampled() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.queue) >= l.maxQueue || l.closed {
		l.dropped++
		return
	}
	l.queue = append(l.queue, s)
	if len(l.queue)%l.batch == 0 {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

// Spans starts spans of one name, kind and instrumentation scope that carry
// the same leading attributes.
type Spans struct {
	log   *SpanLog
	name  string
	kind  trace.SpanKind
	scope instrumentation.Scope
	attrs []attribute.KeyValue
}

// Spans returns a family of spans; attrs are not copied and must not change.
func (l *SpanLog) Spans(scope, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) *Spans {
	return &Spans{log: l, name: name, kind: kind, scope: instrumentation.Scope{Name: scope}, attrs: attrs}
}

// Start returns ctx carrying a new span, a child of ctx's, and the span, or
// nil when the sampler does not record it: ctx then carries its span
// context alone, as the SDK's non-recording span would.
func (f *Spans) Start(ctx context.Context) (context.Context, *Span) {
	psc := trace.SpanContextFromContext(ctx)
	tid := psc.TraceID()
	if !tid.IsValid() {
		tid = newTraceID()
	}
	res := f.log.sampler.ShouldSample(sdktrace.SamplingParameters{ParentContext: ctx, TraceID: tid, Name: f.name, Kind: f.kind})
	scc := trace.SpanContextConfig{TraceID: tid, SpanID: newSpanID(), TraceState: res.Tracestate,
		TraceFlags: psc.TraceFlags() &^ trace.FlagsSampled}
	if res.Decision == sdktrace.RecordAndSample {
		scc.TraceFlags |= trace.FlagsSampled
	}
	sc := trace.NewSpanContext(scc)
	if res.Decision == sdktrace.Drop {
		return trace.ContextWithSpanContext(ctx, sc), nil
	}
	s := &Span{spans: f, name: f.name, sc: sc, parent: psc, start: time.Now()}
	return trace.ContextWithSpan(ctx, s), s
}

func newTraceID() (id trace.TraceID) {
	for !id.IsValid() {
		binary.LittleEndian.PutUint64(id[:8], rand.Uint64())
		binary.LittleEndian.PutUint64(id[8:], rand.Uint64())
	}
	return id
}

func newSpanID() (id trace.SpanID) {
	for !id.IsValid() {
		binary.LittleEndian.PutUint64(id[:], rand.Uint64())
	}
	return id
}

// samplerFromEnv is the sampler OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG name, as the SDK reads them; unset, the SDK's
// default (parent-based, always on).
func samplerFromEnv() (sdktrace.Sampler, error) {
	name := strings.ToLower(strings.TrimSpace(os.Getenv("OTEL_TRACES_SAMPLER")))
	arg := strings.TrimSpace(os.Getenv("OTEL_TRACES_SAMPLER_ARG"))
	ratio := 1.0
	if arg != "" && strings.HasSuffix(name, "traceidratio") {
		v, err := strconv.ParseFloat(arg, 64)
		if err != nil || v < 0 || v > 1 {
			return nil, fmt.Errorf("otel: OTEL_TRACES_SAMPLER_ARG=%q: want a ratio from 0 to 1", arg)
		}
		ratio = v
	}
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(ratio), nil
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio)), nil
	}
	return nil, fmt.Errorf("otel: %s=%q: unsupported sampler", "OTEL_TRACES_SAMPLER", name)
}
