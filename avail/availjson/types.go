package availjson

import (
	"bytes"
	"time"

	"github.com/dropstream/dropstream/avail"
)

// snapshot reads an avail.Snapshot object.
func (s *scanner) snapshot(v *avail.Snapshot) bool { return members(s, v, snapshotMembers) }

var snapshotMembers = []member[avail.Snapshot]{
	{"run_id", func(s *scanner, v *avail.Snapshot) bool { return s.into(&v.RunID) }},
	{"source_id", func(s *scanner, v *avail.Snapshot) bool { return s.into(&v.SourceID) }},
	{"provider", func(s *scanner, v *avail.Snapshot) bool { return s.into(&v.Provider) }},
	{"scope_key", func(s *scanner, v *avail.Snapshot) bool { return s.into(&v.ScopeKey) }},
	{"run_at", func(s *scanner, v *avail.Snapshot) bool { return s.time(&v.RunAt) }},
	{"started_at", func(s *scanner, v *avail.Snapshot) bool { return s.time(&v.StartedAt) }},
	{"ok", func(s *scanner, v *avail.Snapshot) bool { return s.boolInto(&v.OK) }},
	{"error", func(s *scanner, v *avail.Snapshot) bool { return s.into(&v.Error) }},
	{"entities", func(s *scanner, v *avail.Snapshot) bool { return s.entities(&v.Entities) }},
	{"stabilization", func(s *scanner, v *avail.Snapshot) bool { return s.intInto(&v.Stabilization) }},
	{"notify_first_sight", func(s *scanner, v *avail.Snapshot) bool { return s.boolInto(&v.NotifyFirstSight) }},
}

// transition reads an avail.Transition object.
func (s *scanner) transition(v *avail.Transition) bool { return members(s, v, transitionMembers) }

var transitionMembers = []member[avail.Transition]{
	{"event_id", func(s *scanner, v *avail.Transition) bool { return s.into(&v.EventID) }},
	{"entity", func(s *scanner, v *avail.Transition) bool { return s.entity(&v.Entity) }},
	{"scope_key", func(s *scanner, v *avail.Transition) bool { return s.into(&v.ScopeKey) }},
	{"source_id", func(s *scanner, v *avail.Transition) bool { return s.into(&v.SourceID) }},
	{"kind", func(s *scanner, v *avail.Transition) bool { return s.into(&v.Kind) }},
	{"raw", func(s *scanner, v *avail.Transition) bool { return s.boolInto(&v.Raw) }},
	{"stable", func(s *scanner, v *avail.Transition) bool { return s.boolInto(&v.Stable) }},
	{"baseline", func(s *scanner, v *avail.Transition) bool { return s.boolInto(&v.Baseline) }},
	{"notify", func(s *scanner, v *avail.Transition) bool { return s.boolInto(&v.Notify) }},
	{"run_id", func(s *scanner, v *avail.Transition) bool { return s.into(&v.RunID) }},
	{"run_at", func(s *scanner, v *avail.Transition) bool { return s.time(&v.RunAt) }},
	{"last_seen", func(s *scanner, v *avail.Transition) bool { return s.time(&v.LastSeen) }},
	{"trace_id", func(s *scanner, v *avail.Transition) bool { return s.into(&v.TraceID) }},
	{"open_run_id", func(s *scanner, v *avail.Transition) bool { return s.into(&v.OpenRunID) }},
	{"opened_at_ms", func(s *scanner, v *avail.Transition) bool { return s.int64Into(&v.OpenedAtMS) }},
}

// transitions reads an array of transitions; [] gives an empty, non-nil
// slice, as encoding/json does.
func (s *scanner) transitions(v *[]avail.Transition) bool {
	return array(s, v, 4, (*scanner).transition)
}

// runTransitions reads an avail.RunTransitions object.
func (s *scanner) runTransitions(v *avail.RunTransitions) bool {
	return members(s, v, runTransitionsMembers)
}

var runTransitionsMembers = []member[avail.RunTransitions]{
	{"run", func(s *scanner, v *avail.RunTransitions) bool { return s.runRecord(&v.Run) }},
	{"transitions", func(s *scanner, v *avail.RunTransitions) bool { return s.transitions(&v.Transitions) }},
}

// runRecord reads an avail.RunRecord object.
func (s *scanner) runRecord(v *avail.RunRecord) bool { return members(s, v, runRecordMembers) }

var runRecordMembers = []member[avail.RunRecord]{
	{"run_id", func(s *scanner, v *avail.RunRecord) bool { return s.into(&v.RunID) }},
	{"source_id", func(s *scanner, v *avail.RunRecord) bool { return s.into(&v.SourceID) }},
	{"provider", func(s *scanner, v *avail.RunRecord) bool { return s.into(&v.Provider) }},
	{"scope_key", func(s *scanner, v *avail.RunRecord) bool { return s.into(&v.ScopeKey) }},
	{"started_at", func(s *scanner, v *avail.RunRecord) bool { return s.time(&v.StartedAt) }},
	{"run_at", func(s *scanner, v *avail.RunRecord) bool { return s.time(&v.RunAt) }},
	{"status", func(s *scanner, v *avail.RunRecord) bool { return s.into(&v.Status) }},
	{"error", func(s *scanner, v *avail.RunRecord) bool { return s.into(&v.Error) }},
	{"observed", func(s *scanner, v *avail.RunRecord) bool { return s.intInto(&v.Observed) }},
	{"opened", func(s *scanner, v *avail.RunRecord) bool { return s.intInto(&v.Opened) }},
	{"closed", func(s *scanner, v *avail.RunRecord) bool { return s.intInto(&v.Closed) }},
	{"applied", func(s *scanner, v *avail.RunRecord) bool { return s.boolInto(&v.Applied) }},
	{"trace_id", func(s *scanner, v *avail.RunRecord) bool { return s.into(&v.TraceID) }},
}

// entity reads an avail.Entity object.
func (s *scanner) entity(v *avail.Entity) bool { return members(s, v, entityMembers) }

var entityMembers = []member[avail.Entity]{
	{"key", func(s *scanner, v *avail.Entity) bool { return s.into(&v.Key) }},
	{"kind", func(s *scanner, v *avail.Entity) bool { return s.into(&v.Kind) }},
	{"provider", func(s *scanner, v *avail.Entity) bool { return s.into(&v.Provider) }},
	{"venue", func(s *scanner, v *avail.Entity) bool { return s.into(&v.Venue) }},
	{"venue_name", func(s *scanner, v *avail.Entity) bool { return s.into(&v.VenueName) }},
	{"date", func(s *scanner, v *avail.Entity) bool { return s.into(&v.Date) }},
	{"time", func(s *scanner, v *avail.Entity) bool { return s.into(&v.Time) }},
	{"party_size", func(s *scanner, v *avail.Entity) bool { return s.intInto(&v.PartySize) }},
	{"attrs", func(s *scanner, v *avail.Entity) bool { return s.attrs(&v.Attrs) }},
}

// entities reads an array of entities; [] gives an empty, non-nil slice,
// as encoding/json does.
func (s *scanner) entities(v *[]avail.Entity) bool {
	// Counting braces sizes the slice once, at most twice too large.
	rest := s.b[s.i:]
	n := min(bytes.Count(rest, openBrace), len(rest)/12+1, avail.MaxEntities+1)
	return array(s, v, max(n, 16), (*scanner).entity)
}

var openBrace = []byte{'{'}

// array reads an array of Ts with read into *v, made with capacity
// capacity; [] gives an empty, non-nil slice, as encoding/json does.
func array[T any](s *scanner, v *[]T, capacity int, read func(*scanner, *T) bool) bool {
	if !s.next('[') {
		return false
	}
	out := make([]T, 0, capacity)
	if s.next(']') {
		*v = out
		return true
	}
	for {
		var zero T
		out = append(out, zero)
		if !read(s, &out[len(out)-1]) {
			return false
		}
		if s.next(',') {
			continue
		}
		if !s.next(']') {
			return false
		}
		*v = out
		return true
	}
}

// attrs reads an object of strings; {} gives an empty, non-nil map, as
// encoding/json does.
func (s *scanner) attrs(v *map[string]string) bool {
	s.ws()
	// The entities of a scope mostly carry the same attributes: an object
	// byte for byte equal to the last one read decodes to the same map.
	if len(s.lastAttrs) > 0 && bytes.HasPrefix(s.b[s.i:], s.lastAttrs) {
		s.i += len(s.lastAttrs)
		*v = s.lastMap
		return true
	}
	start := s.i
	m := map[string]string{}
	ok := s.object(func([]byte) bool {
		name := s.substring(s.name[0], s.name[1])
		val, ok := s.str()
		if ok {
			m[name] = val
		}
		return ok
	})
	if ok {
		*v = m
		s.lastAttrs, s.lastMap = s.b[start:s.i], m
	}
	return ok
}

func (s *scanner) into(v *string) bool {
	var ok bool
	*v, ok = s.str()
	return ok
}

func (s *scanner) intInto(v *int) bool {
	var ok bool
	*v, ok = s.integer()
	return ok
}

func (s *scanner) int64Into(v *int64) bool {
	n, ok := s.integer()
	*v = int64(n)
	return ok
}

func (s *scanner) boolInto(v *bool) bool {
	var ok bool
	*v, ok = s.boolean()
	return ok
}

// time reads a string as time.Time's UnmarshalJSON does.
func (s *scanner) time(v *time.Time) bool {
	q, ok := s.quoted()
	return ok && v.UnmarshalJSON(q) == nil
}
