package availjson

import (
	"bytes"
	"time"

	"github.com/dropstream/dropstream/avail"
)

// snapshot reads an avail.Snapshot object.
func (s *scanner) snapshot(v *avail.Snapshot) bool {
	var mask uint32
	return s.object(func(name []byte) bool {
		ok := false
		switch string(name) {
		case "run_id":
			ok = seen(&mask, 1<<0) && s.into(&v.RunID)
		case "source_id":
			ok = seen(&mask, 1<<1) && s.into(&v.SourceID)
		case "provider":
			ok = seen(&mask, 1<<2) && s.into(&v.Provider)
		case "scope_key":
			ok = seen(&mask, 1<<3) && s.into(&v.ScopeKey)
		case "run_at":
			ok = seen(&mask, 1<<4) && s.time(&v.RunAt)
		case "started_at":
			ok = seen(&mask, 1<<5) && s.time(&v.StartedAt)
		case "ok":
			ok = seen(&mask, 1<<6) && s.boolInto(&v.OK)
		case "error":
			ok = seen(&mask, 1<<7) && s.into(&v.Error)
		case "entities":
			ok = seen(&mask, 1<<8) && s.entities(&v.Entities)
		case "stabilization":
			ok = seen(&mask, 1<<9) && s.intInto(&v.Stabilization)
		case "notify_first_sight":
			ok = seen(&mask, 1<<10) && s.boolInto(&v.NotifyFirstSight)
		}
		return ok
	})
}

// transition reads an avail.Transition object.
func (s *scanner) transition(v *avail.Transition) bool {
	var mask uint32
	return s.object(func(name []byte) bool {
		ok := false
		switch string(name) {
		case "event_id":
			ok = seen(&mask, 1<<0) && s.into(&v.EventID)
		case "entity":
			ok = seen(&mask, 1<<1) && s.entity(&v.Entity)
		case "scope_key":
			ok = seen(&mask, 1<<2) && s.into(&v.ScopeKey)
		case "source_id":
			ok = seen(&mask, 1<<3) && s.into(&v.SourceID)
		case "kind":
			ok = seen(&mask, 1<<4) && s.into(&v.Kind)
		case "raw":
			ok = seen(&mask, 1<<5) && s.boolInto(&v.Raw)
		case "stable":
			ok = seen(&mask, 1<<6) && s.boolInto(&v.Stable)
		case "baseline":
			ok = seen(&mask, 1<<7) && s.boolInto(&v.Baseline)
		case "notify":
			ok = seen(&mask, 1<<8) && s.boolInto(&v.Notify)
		case "run_id":
			ok = seen(&mask, 1<<9) && s.into(&v.RunID)
		case "run_at":
			ok = seen(&mask, 1<<10) && s.time(&v.RunAt)
		case "last_seen":
			ok = seen(&mask, 1<<11) && s.time(&v.LastSeen)
		case "trace_id":
			ok = seen(&mask, 1<<12) && s.into(&v.TraceID)
		case "open_run_id":
			ok = seen(&mask, 1<<13) && s.into(&v.OpenRunID)
		case "opened_at_ms":
			ok = seen(&mask, 1<<14) && s.int64Into(&v.OpenedAtMS)
		}
		return ok
	})
}

// transitions reads an array of transitions; [] gives an empty, non-nil
// slice, as encoding/json does.
func (s *scanner) transitions(v *[]avail.Transition) bool {
	return array(s, v, 4, (*scanner).transition)
}

// runTransitions reads an avail.RunTransitions object.
func (s *scanner) runTransitions(v *avail.RunTransitions) bool {
	var mask uint32
	return s.object(func(name []byte) bool {
		ok := false
		switch string(name) {
		case "run":
			ok = seen(&mask, 1<<0) && s.runRecord(&v.Run)
		case "transitions":
			ok = seen(&mask, 1<<1) && s.transitions(&v.Transitions)
		}
		return ok
	})
}

// runRecord reads an avail.RunRecord object.
func (s *scanner) runRecord(v *avail.RunRecord) bool {
	var mask uint32
	return s.object(func(name []byte) bool {
		ok := false
		switch string(name) {
		case "run_id":
			ok = seen(&mask, 1<<0) && s.into(&v.RunID)
		case "source_id":
			ok = seen(&mask, 1<<1) && s.into(&v.SourceID)
		case "provider":
			ok = seen(&mask, 1<<2) && s.into(&v.Provider)
		case "scope_key":
			ok = seen(&mask, 1<<3) && s.into(&v.ScopeKey)
		case "started_at":
			ok = seen(&mask, 1<<4) && s.time(&v.StartedAt)
		case "run_at":
			ok = seen(&mask, 1<<5) && s.time(&v.RunAt)
		case "status":
			ok = seen(&mask, 1<<6) && s.into(&v.Status)
		case "error":
			ok = seen(&mask, 1<<7) && s.into(&v.Error)
		case "observed":
			ok = seen(&mask, 1<<8) && s.intInto(&v.Observed)
		case "opened":
			ok = seen(&mask, 1<<9) && s.intInto(&v.Opened)
		case "closed":
			ok = seen(&mask, 1<<10) && s.intInto(&v.Closed)
		case "applied":
			ok = seen(&mask, 1<<11) && s.boolInto(&v.Applied)
		case "trace_id":
			ok = seen(&mask, 1<<12) && s.into(&v.TraceID)
		}
		return ok
	})
}

// entity reads an avail.Entity object into a zero *v.
func (s *scanner) entity(v *avail.Entity) bool {
	var mask uint32
	return s.object(func(name []byte) bool {
		ok := false
		switch string(name) {
		case "key":
			ok = seen(&mask, 1<<0) && s.into(&v.Key)
		case "kind":
			ok = seen(&mask, 1<<1) && s.into(&v.Kind)
		case "provider":
			ok = seen(&mask, 1<<2) && s.into(&v.Provider)
		case "venue":
			ok = seen(&mask, 1<<3) && s.into(&v.Venue)
		case "venue_name":
			ok = seen(&mask, 1<<4) && s.into(&v.VenueName)
		case "date":
			ok = seen(&mask, 1<<5) && s.into(&v.Date)
		case "time":
			ok = seen(&mask, 1<<6) && s.into(&v.Time)
		case "party_size":
			ok = seen(&mask, 1<<7) && s.intInto(&v.PartySize)
		case "attrs":
			ok = seen(&mask, 1<<8) && s.attrs(&v.Attrs)
		}
		return ok
	})
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
