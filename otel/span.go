package otel

import (
	"reflect"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

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
	if !s.ended {
		s.setAttributes(attrs)
		if err != nil {
			s.addEvent(semconv.ExceptionEventName, time.Now(), exceptionAttrs(err))
			s.setStatus(codes.Error, err.Error())
		}
	}
	s.endLocked(time.Now())
}

// endLocked ends the span at t, unless it has ended, and unlocks it.
func (s *Span) endLocked(t time.Time) {
	if s.ended {
		s.mu.Unlock()
		return
	}
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

// live runs f under the span's lock unless the span has ended.
func (s *Span) live(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		f()
	}
}

// SetAttributes adds attributes, up to the SDK's default limit of 128.
func (s *Span) SetAttributes(kv ...attribute.KeyValue) {
	s.live(func() { s.setAttributes(kv) })
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
	s.live(func() { s.addEvent(name, c.Timestamp(), c.Attributes()) })
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
	if link.SpanContext.IsValid() {
		s.live(func() {
			s.links = append(s.links, sdktrace.Link{SpanContext: link.SpanContext, Attributes: link.Attributes})
		})
	}
}

// RecordError adds an exception event for err, as the SDK does.
func (s *Span) RecordError(err error, opts ...trace.EventOption) {
	if err == nil {
		return
	}
	c := trace.NewEventConfig(opts...)
	s.live(func() {
		s.addEvent(semconv.ExceptionEventName, c.Timestamp(), append(c.Attributes(), exceptionAttrs(err)...))
	})
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
	s.live(func() { s.setStatus(code, description) })
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
	s.live(func() { s.name = name })
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
