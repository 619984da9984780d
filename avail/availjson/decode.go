// Package availjson decodes and encodes the pipeline's hot messages faster
// than encoding/json with the same results: a scanner reads the plain form
// json.Marshal and cjson write, and anything else falls back to
// encoding/json. Decoded attributes may be shared, so they are read-only.
// It stays beside goccy/go-json because it beats it in the same run
// (BENCHMARKS.md, "Hot JSON beside goccy/go-json").
package availjson

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/dropstream/dropstream/avail"
)

// UnmarshalSnapshot decodes data into *s as json.Unmarshal(data, s) does.
func UnmarshalSnapshot(data []byte, s *avail.Snapshot) error {
	return unmarshal(data, s, (*scanner).snapshot)
}

// UnmarshalTransition decodes data into *t as json.Unmarshal(data, t) does.
func UnmarshalTransition(data []byte, t *avail.Transition) error {
	return unmarshal(data, t, (*scanner).transition)
}

// UnmarshalRunTransitions decodes data into *r as json.Unmarshal(data, r)
// does.
func UnmarshalRunTransitions(data []byte, r *avail.RunTransitions) error {
	return unmarshal(data, r, (*scanner).runTransitions)
}

// DecodeTransitions decodes the payload of a message of the transition
// topic, as DecodeRunTransitions does, and returns its transitions.
func DecodeTransitions(typ string, payload []byte) ([]avail.Transition, error) {
	_, ts, err := DecodeRunTransitions(typ, payload)
	return ts, err
}

// DecodeRunTransitions decodes a transition topic payload: one transition
// (run nil) or a run record and its expanded transitions.
func DecodeRunTransitions(typ string, payload []byte) (*avail.RunRecord, []avail.Transition, error) {
	switch typ {
	case avail.TypeTransition:
		ts := make([]avail.Transition, 1)
		if err := UnmarshalTransition(payload, &ts[0]); err != nil {
			return nil, nil, err
		}
		return nil, ts, nil
	case avail.TypeTransitions:
		var r avail.RunTransitions
		if err := UnmarshalRunTransitions(payload, &r); err != nil {
			return nil, nil, err
		}
		if n := len(r.Transitions); n == 0 || n > avail.MaxTransitionsPerMessage {
			return nil, nil, fmt.Errorf("availjson: %d transitions in one message, want 1 to %d", n, avail.MaxTransitionsPerMessage)
		}
		return &r.Run, r.Expand(), nil
	}
	return nil, nil, fmt.Errorf("availjson: message type %.64q, want %q or %q", typ, avail.TypeTransition, avail.TypeTransitions)
}

// UnmarshalRunRecord decodes data into *r as json.Unmarshal(data, r) does.
func UnmarshalRunRecord(data []byte, r *avail.RunRecord) error {
	return unmarshal(data, r, (*scanner).runRecord)
}

// unmarshal decodes data with read, or with encoding/json when read
// refuses it.
func unmarshal[T any](data []byte, out *T, read func(*scanner, *T) bool) error {
	var v T
	sc := scanner{b: data}
	if read(&sc, &v) && sc.end() {
		*out = v
		return nil
	}
	return json.Unmarshal(data, out)
}

// scanner reads b from i. A method returns false for input not in the
// plain form, and the caller falls back to encoding/json.
type scanner struct {
	b []byte
	i int
	// text is b as a string, made on the first string value: every string
	// decoded is a substring of it, one allocation for all of them.
	text string
	// name is the offsets in b of the member name object passes to field.
	name [2]int
	// lastAttrs is the text of the last attrs object read, lastMap its
	// map, which entities with the same text share.
	lastAttrs []byte
	lastMap   map[string]string
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// end reports whether only white space is left.
func (s *scanner) end() bool {
	s.ws()
	return s.i == len(s.b)
}

// next skips white space and consumes c.
func (s *scanner) next(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// quoted returns the bytes of a string without escapes or control
// characters, in valid UTF-8, quotes included.
func (s *scanner) quoted() ([]byte, bool) {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false
	}
	start := s.i
	ascii := true
	for j := s.i + 1; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			s.i = j + 1
			q := s.b[start:s.i]
			if !ascii && !utf8.Valid(q) {
				return nil, false // encoding/json replaces invalid bytes
			}
			return q, true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

// str returns a string value.
func (s *scanner) str() (string, bool) {
	q, ok := s.quoted()
	if !ok {
		return "", false
	}
	return s.substring(s.i-len(q)+1, s.i-1), true
}

// substring returns b[from:to] as a substring of s.text.
func (s *scanner) substring(from, to int) string {
	if s.text == "" {
		s.text = string(s.b)
	}
	return s.text[from:to]
}

// integer returns an integer literal of at most 18 digits (no fraction or
// exponent, which encoding/json rejects for an int).
func (s *scanner) integer() (int, bool) {
	s.ws()
	j, neg := s.i, false
	if j < len(s.b) && s.b[j] == '-' {
		neg = true
		j++
	}
	start, n := j, 0
	for ; j < len(s.b) && s.b[j] >= '0' && s.b[j] <= '9'; j++ {
		n = n*10 + int(s.b[j]-'0')
	}
	digits := j - start
	if digits == 0 || digits > 18 || digits > 1 && s.b[start] == '0' {
		return 0, false
	}
	if j < len(s.b) && (s.b[j] == '.' || s.b[j] == 'e' || s.b[j] == 'E') {
		return 0, false
	}
	s.i = j
	if neg {
		n = -n
	}
	return n, true
}

// boolean returns a true or false literal.
func (s *scanner) boolean() (bool, bool) {
	s.ws()
	rest := s.b[s.i:]
	switch {
	case len(rest) >= 4 && string(rest[:4]) == "true":
		s.i += 4
		return true, s.delimited()
	case len(rest) >= 5 && string(rest[:5]) == "false":
		s.i += 5
		return false, s.delimited()
	}
	return false, false
}

// delimited reports whether a literal ends at i (not "truex").
func (s *scanner) delimited() bool {
	if s.i == len(s.b) {
		return true
	}
	switch s.b[s.i] {
	case ' ', '\t', '\n', '\r', ',', '}', ']':
		return true
	}
	return false
}

// object reads an object, calling field for each member; field returns
// false for an unknown or repeated name or an unreadable value.
func (s *scanner) object(field func(name []byte) bool) bool {
	if !s.next('{') {
		return false
	}
	if s.next('}') {
		return true
	}
	for {
		q, ok := s.quoted()
		if !ok {
			return false
		}
		s.name = [2]int{s.i - len(q) + 1, s.i - 1}
		if !s.next(':') || !field(q[1:len(q)-1]) {
			return false
		}
		if s.next(',') {
			continue
		}
		return s.next('}')
	}
}

// member is one member of an object: its name and how to read its value.
type member[T any] struct {
	name string
	read func(*scanner, *T) bool
}

// members reads an object of the members ms into *v; an unknown or
// repeated name fails.
func members[T any](s *scanner, v *T, ms []member[T]) bool {
	var seen uint32
	return s.object(func(name []byte) bool {
		for i, m := range ms {
			if m.name == string(name) {
				bit := uint32(1) << i
				ok := seen&bit == 0 && m.read(s, v)
				seen |= bit
				return ok
			}
		}
		return false
	})
}
