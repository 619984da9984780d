package otel

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gotel "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
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

// Dropped is how many ended spans a full queue dropped.
func (l *SpanLog) Dropped() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dropped
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
		for len(spans) > 0 {
			n := min(len(spans), l.batch)
			ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
			if err := l.exp.ExportSpans(ctx, spans[:n]); err != nil {
				gotel.Handle(fmt.Errorf("otel: export %d spans: %w", n, err))
			}
			cancel()
			clear(spans[:n])
			spans = spans[n:]
		}
		spare = spans[:0:cap(spans)]
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
		a, b := rand.Uint64(), rand.Uint64()
		for i := range 8 {
			id[i], id[8+i] = byte(a>>(8*i)), byte(b>>(8*i))
		}
	}
	return id
}

func newSpanID() (id trace.SpanID) {
	for !id.IsValid() {
		a := rand.Uint64()
		for i := range 8 {
			id[i] = byte(a >> (8 * i))
		}
	}
	return id
}

// maxSpanAttrs bounds a span's attributes, as the SDK's default limit does.
const maxSpanAttrs = 128

// Span is a span of a [SpanLog]: a trace.Span until it ends, then an
// sdktrace.ReadOnlySpan, which no longer changes.
type Span struct {
	embedded.Span
	// ReadOnlySpan is nil: it supplies the interface's unexported method,
	// every other method is Span's own.
	sdktrace.ReadOnlySpan
	spans *Spans

	mu            sync.Mutex // of the fields below until ended
	name          string
	sc, parent    trace.SpanContext
	start, end    time.Time
	ended         bool
	own           [4]attribute.KeyValue // after spans.attrs
	nOwn          int
	more          []attribute.KeyValue // after own
	droppedAttrs  int
	events        []sdktrace.Event
	links         []sdktrace.Link
	status        sdktrace.Status
	droppedEvents int
}

var (
	_ trace.Span            = (*Span)(nil)
	_ sdktrace.ReadOnlySpan = (*Span)(nil)
)

// Finish ends the span now: it adds attrs and, for a non-nil err, records
// it as an exception event and sets the Error status to its message.
func (s *Span) Finish(err error, attrs ...attribute.KeyValue) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.setAttributes(attrs)
	if err != nil {
		s.recordError(err, time.Now())
		s.setStatus(codes.Error, err.Error())
	}
	s.endLocked(time.Now())
}

// endLocked ends the span at t and unlocks it.
func (s *Span) endLocked(t time.Time) {
	s.end, s.ended = t, true
	s.mu.Unlock()
	s.spans.log.end(s)
}

// End ends the span, at the time the options give or now.
func (s *Span) End(opts ...trace.SpanEndOption) {
	c := trace.NewSpanEndConfig(opts...)
	t := c.Timestamp()
	if t.IsZero() {
		t = time.Now()
	}
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.endLocked(t)
}

// SpanContext returns the span's span context.
func (s *Span) SpanContext() trace.SpanContext { return s.sc }

// IsRecording reports whether the span has not ended.
func (s *Span) IsRecording() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.ended
}

// SetAttributes adds attributes, up to the SDK's default limit of 128.
func (s *Span) SetAttributes(kv ...attribute.KeyValue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.setAttributes(kv)
	}
}

func (s *Span) setAttributes(kv []attribute.KeyValue) {
	for _, a := range kv {
		switch {
		case !a.Valid():
		case s.nOwn < len(s.own):
			s.own[s.nOwn] = a
			s.nOwn++
		case len(s.spans.attrs)+s.nOwn+len(s.more) < maxSpanAttrs:
			s.more = append(s.more, a)
		default:
			s.droppedAttrs++
		}
	}
}

// AddEvent adds an event, up to the SDK's default limit of 128.
func (s *Span) AddEvent(name string, opts ...trace.EventOption) {
	c := trace.NewEventConfig(opts...)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.addEvent(name, c.Timestamp(), c.Attributes())
	}
}

func (s *Span) addEvent(name string, t time.Time, attrs []attribute.KeyValue) {
	if t.IsZero() {
		t = time.Now()
	}
	if len(s.events) >= maxSpanAttrs {
		s.droppedEvents++
		return
	}
	s.events = append(s.events, sdktrace.Event{Name: name, Time: t, Attributes: attrs})
}

// AddLink adds a link to a valid span context.
func (s *Span) AddLink(link trace.Link) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended && link.SpanContext.IsValid() {
		s.links = append(s.links, sdktrace.Link{SpanContext: link.SpanContext, Attributes: link.Attributes})
	}
}

// RecordError adds an exception event for err, as the SDK does.
func (s *Span) RecordError(err error, opts ...trace.EventOption) {
	if err == nil {
		return
	}
	c := trace.NewEventConfig(opts...)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.addEvent(semconv.ExceptionEventName, c.Timestamp(), append(c.Attributes(), exceptionAttrs(err)...))
	}
}

func (s *Span) recordError(err error, t time.Time) {
	s.addEvent(semconv.ExceptionEventName, t, exceptionAttrs(err))
}

// exceptionAttrs are the SDK's attributes of an exception event.
func exceptionAttrs(err error) []attribute.KeyValue {
	t := reflect.TypeOf(err)
	name := t.String()
	if t.PkgPath() != "" || t.Name() != "" {
		name = t.PkgPath() + "." + t.Name()
	}
	return []attribute.KeyValue{semconv.ExceptionType(name), semconv.ExceptionMessage(err.Error())}
}

// SetStatus sets the status as the SDK does: Ok is final, and only Error
// keeps a description.
func (s *Span) SetStatus(code codes.Code, description string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.setStatus(code, description)
	}
}

func (s *Span) setStatus(code codes.Code, description string) {
	if s.status.Code > code {
		return
	}
	s.status = sdktrace.Status{Code: code}
	if code == codes.Error {
		s.status.Description = description
	}
}

// SetName renames the span.
func (s *Span) SetName(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.name = name
	}
}

// TracerProvider returns the provider of the span's log.
func (s *Span) TracerProvider() trace.TracerProvider { return s.spans.log.tp }

// The methods below read an ended span.

// Name returns the span's name.
func (s *Span) Name() string { return s.name }

// Parent returns the parent's span context.
func (s *Span) Parent() trace.SpanContext { return s.parent }

// SpanKind returns the span's kind.
func (s *Span) SpanKind() trace.SpanKind { return s.spans.kind }

// StartTime returns when the span started.
func (s *Span) StartTime() time.Time { return s.start }

// EndTime returns when the span ended.
func (s *Span) EndTime() time.Time { return s.end }

// Attributes returns the family's attributes followed by the span's own;
// a key set twice keeps its last value.
func (s *Span) Attributes() []attribute.KeyValue {
	all := make([]attribute.KeyValue, 0, len(s.spans.attrs)+s.nOwn+len(s.more))
	all = append(append(append(all, s.spans.attrs...), s.own[:s.nOwn]...), s.more...)
	if len(s.more) == 0 {
		return all
	}
	set := attribute.NewSet(all...)
	return set.ToSlice()
}

// Links returns the links added to the span.
func (s *Span) Links() []sdktrace.Link { return s.links }

// Events returns the span's events.
func (s *Span) Events() []sdktrace.Event { return s.events }

// Status returns the span's status.
func (s *Span) Status() sdktrace.Status { return s.status }

// InstrumentationScope returns the scope of the span's family.
func (s *Span) InstrumentationScope() instrumentation.Scope { return s.spans.scope }

// InstrumentationLibrary returns the scope of the span's family.
//
// Deprecated: use InstrumentationScope.
func (s *Span) InstrumentationLibrary() instrumentation.Library {
	return instrumentation.Library(s.spans.scope)
}

// Resource returns the resource of the span's log.
func (s *Span) Resource() *resource.Resource { return s.spans.log.res }

// DroppedAttributes returns the attributes beyond the limit.
func (s *Span) DroppedAttributes() int { return s.droppedAttrs }

// DroppedLinks returns 0: no link is dropped.
func (s *Span) DroppedLinks() int { return 0 }

// DroppedEvents returns the events beyond the limit.
func (s *Span) DroppedEvents() int { return s.droppedEvents }

// ChildSpanCount returns 0: the log does not count children.
func (s *Span) ChildSpanCount() int { return 0 }

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
