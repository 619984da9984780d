package notifier

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// unmarshalRequest decodes b into the zero *r as json.Unmarshal does. The
// common form (known keys as written, no nulls, no inline destination) is
// read by hand: its strings without escapes share one allocation; anything
// else goes to json.Unmarshal.
func unmarshalRequest(b []byte, r *Request) error {
	if decodeRequestFast(b, r) {
		return nil
	}
	*r = Request{}
	return json.Unmarshal(b, r)
}

// decodeRequestFast decodes b into r and reports true, or reports false
// (r then holds garbage) when b is not of the common form.
func decodeRequestFast(b []byte, r *Request) bool {
	s := string(b) // the strings are substrings of one copy
	i := skipSpace(s, 0)
	if i == len(s) || s[i] != '{' {
		return false
	}
	i = skipSpace(s, i+1)
	if i < len(s) && s[i] == '}' {
		return skipSpace(s, i+1) == len(s)
	}
	for {
		key, next, ok := plainString(s, i)
		if !ok {
			return false
		}
		if i = skipSpace(s, next); i == len(s) || s[i] != ':' {
			return false
		}
		i = skipSpace(s, i+1)
		if next, ok = r.setField(key, b, s, i); !ok {
			return false
		}
		i = skipSpace(s, next)
		switch {
		case i == len(s):
			return false
		case s[i] == ',':
			i = skipSpace(s, i+1)
		case s[i] == '}':
			return skipSpace(s, i+1) == len(s)
		default:
			return false
		}
	}
}

// setField reads the value of key at s[i:] (s is b) into r; it returns
// the end of the value, or false for a key or value outside the common form.
func (r *Request) setField(key string, b []byte, s string, i int) (int, bool) {
	var str *string
	switch key {
	case "flow":
		str = &r.Flow
	case "event":
		str = &r.Event
	case "subject":
		str = &r.Subject
	case "subscriber_id":
		str = &r.SubscriberID
	case "destination_id":
		str = &r.DestinationID
	case "window":
		str = &r.Window
	case "title":
		str = &r.Title
	case "text":
		str = &r.Text
	case "html":
		str = &r.HTML
	case "trace_id":
		str = &r.TraceID
	case "event_id":
		str = &r.EventID
	case "run_id":
		str = &r.RunID
	case "critical":
		return boolValue(s, i, &r.Critical)
	case "digest":
		return boolValue(s, i, &r.Digest)
	case "observed_at":
		_, end, ok := plainString(s, i)
		if !ok || r.ObservedAt.UnmarshalJSON(b[i:end]) != nil {
			return 0, false
		}
		return end, true
	case "payload":
		end, ok := valueEnd(s, i)
		if !ok || s[i] == 'n' || !json.Valid(b[i:end]) {
			return 0, false
		}
		r.Payload = append(json.RawMessage(nil), b[i:end]...)
		return end, true
	default:
		return 0, false
	}
	if v, end, ok := plainString(s, i); ok {
		*str = v
		return end, true
	}
	// Escapes or invalid UTF-8: this string alone as json.Unmarshal reads it.
	if i >= len(s) || s[i] != '"' {
		return 0, false
	}
	end, ok := stringEnd(s, i)
	return end, ok && json.Unmarshal(b[i:end], str) == nil
}

// plainString returns the string at s[i:] and its end, when it has no
// escape and is valid UTF-8.
func plainString(s string, i int) (string, int, bool) {
	if i >= len(s) || s[i] != '"' {
		return "", 0, false
	}
	for j := i + 1; j < len(s); j++ {
		switch c := s[j]; {
		case c == '"':
			v := s[i+1 : j]
			return v, j + 1, utf8.ValidString(v)
		case c == '\\' || c < 0x20:
			return "", 0, false
		}
	}
	return "", 0, false
}

func boolValue(s string, i int, v *bool) (int, bool) {
	switch {
	case len(s)-i >= 4 && s[i:i+4] == "true":
		*v = true
		return i + 4, true
	case len(s)-i >= 5 && s[i:i+5] == "false":
		*v = false
		return i + 5, true
	}
	return 0, false
}

// valueEnd returns the end of the JSON value at s[i:], checked only for
// the ends of its strings and its nesting.
func valueEnd(s string, i int) (int, bool) {
	if i >= len(s) {
		return 0, false
	}
	switch s[i] {
	case '"':
		return stringEnd(s, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(s); j++ {
			switch s[j] {
			case '"':
				end, ok := stringEnd(s, j)
				if !ok {
					return 0, false
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1, true
				}
			}
		}
		return 0, false
	}
	j := i
	for j < len(s) && strings.IndexByte(",}] \t\n\r", s[j]) < 0 {
		j++
	}
	return j, j > i
}

// stringEnd returns the end of the JSON string at s[i:].
func stringEnd(s string, i int) (int, bool) {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '"':
			return j + 1, true
		}
	}
	return 0, false
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}
