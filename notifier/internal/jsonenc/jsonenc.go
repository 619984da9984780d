// Package jsonenc appends JSON values byte for byte as encoding/json
// writes them, without reflection, for the notifier's hot records.
package jsonenc

import (
	"encoding/json"
	"errors"
	"strconv"
	"time"
)

// String appends s as a JSON string, as encoding/json quotes it.
func String(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// Field appends ,"name": (no comma when first) for a name needing no escape.
func Field(b []byte, name string, first bool) []byte {
	if !first {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, name...)
	return append(b, '"', ':')
}

// Int appends n.
func Int(b []byte, n int64) []byte { return strconv.AppendInt(b, n, 10) }

// Bool appends true or false.
func Bool(b []byte, v bool) []byte { return strconv.AppendBool(b, v) }

// Time appends t as time.Time's MarshalJSON does, failing as it does.
func Time(b []byte, t time.Time) ([]byte, error) {
	b = append(b, '"')
	n0 := len(b)
	b = t.AppendFormat(b, time.RFC3339Nano)
	switch {
	case b[n0+len("9999")] != '-':
		return b, errors.New("jsonenc: year outside of range [0,9999]")
	case b[len(b)-1] != 'Z':
		c := b[len(b)-len("Z07:00")]
		if ('0' <= c && c <= '9') || 10*(b[len(b)-5]-'0')+(b[len(b)-4]-'0') >= 24 {
			return b, errors.New("jsonenc: timezone hour outside of range [0,23]")
		}
	}
	return append(b, '"'), nil
}

// Raw appends a valid JSON document as encoding/json writes a
// json.RawMessage: compacted, with <, > and & escaped.
func Raw(b []byte, raw json.RawMessage) ([]byte, error) {
	if !json.Valid(raw) {
		q, err := json.Marshal(raw)
		return append(b, q...), err
	}
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\n', '\r', '<', '>', '&', 0xe2: // 0xe2 leads U+2028 and U+2029
			q, err := json.Marshal(raw)
			return append(b, q...), err
		}
	}
	return append(b, raw...), nil
}
