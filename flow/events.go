package flow

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/dropstream/dropstream/internal/tenancy"
	"github.com/dropstream/dropstream/stream"
)

// MaxEvents bounds the limit a Description.Events is asked for.
const MaxEvents = 200

// ScanFor returns how many of a flow's newest events Description.Events
// reads to find limit that v sees: limit when v sees all, else ten times
// as many (Recent bounds it), since other tenants' events are skipped.
func ScanFor(v tenancy.View, limit int) int {
	if v.All {
		return limit
	}
	return 10 * limit
}

// Event is something a flow did that a person may ask about: a
// transition, a notification sent, a checkout decided. The console lists
// a flow's recent events and follows each one's Cause.
type Event struct {
	// Kind names what happened ("transition", "notification", "checkout").
	Kind string `json:"kind"`
	// ID identifies the event within its kind (a notification's id, an
	// event id), "" when it has none.
	ID   string    `json:"id,omitempty"`
	Time time.Time `json:"time"`
	// Subject is what the event is about (an entity, a subscriber, an
	// order); Summary says what happened, in a line.
	Subject string `json:"subject"`
	Summary string `json:"summary"`
	// Change is the state the subject entered ("open", "close"), when the
	// event is such a flip; the console counts them per minute.
	Change string `json:"change,omitempty"`
	// Cause names what led to the event, nearest first (a notification's
	// transition, then its run).
	Cause []Ref `json:"cause,omitempty"`
	// TraceID is the trace the event belongs to, "" when unknown.
	TraceID string `json:"trace_id,omitempty"`
	// Steps are the event's parts in order (a checkout's saga steps).
	Steps []Step `json:"steps,omitempty"`
}

// Ref names another event or record: its kind ("transition", "run") and
// id.
type Ref struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
}

// Step is one part of an event (a saga's stock or payment step, or its
// compensation).
type Step struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Result string `json:"result,omitempty"`
}

// Entry is a stream entry read back by Recent: its id (whose time part is
// when it was published), type, payload and trace context.
type Entry struct {
	ID          string
	Type        string
	Payload     []byte
	TraceParent string
}

// Time is when the entry was published, from its id.
func (e Entry) Time() time.Time {
	ms, _, _ := strings.Cut(e.ID, "-")
	v, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(v)
}

// Recent reads the newest entries of a topic, up to limit over all its
// partitions, newest first: what a flow's Events reads back from the
// streams it already keeps. Entries trimmed away are gone.
func Recent(ctx context.Context, rdb redis.UniversalClient, topic stream.Topic, limit int) ([]Entry, error) {
	limit = min(max(limit, 1), 10*MaxEvents)
	var out []Entry
	for p := 0; p < topic.Partitions; p++ {
		xs, err := rdb.XRevRangeN(ctx, topic.Stream(p), "+", "-", int64(limit)).Result()
		if err != nil {
			return nil, fmt.Errorf("recent entries of %s: %w", topic, err)
		}
		for _, x := range xs {
			e := Entry{ID: x.ID}
			e.Type, _ = x.Values["type"].(string)
			payload, _ := x.Values["payload"].(string)
			e.Payload = []byte(payload)
			e.TraceParent, _ = x.Values[stream.MetaTraceParent].(string)
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b Entry) int { return b.Time().Compare(a.Time()) })
	return out[:min(len(out), limit)], nil
}

// TraceIDFrom returns the trace id of ctx's span, or "".
func TraceIDFrom(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		return sc.TraceID().String()
	}
	return ""
}

// TraceIDOf returns the trace id of a W3C traceparent, or "".
func TraceIDOf(traceparent string) string {
	parts := strings.Split(traceparent, "-")
	if len(parts) != 4 || len(parts[1]) != 32 {
		return ""
	}
	return parts[1]
}
