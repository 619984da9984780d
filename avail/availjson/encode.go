package availjson

import (
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/dropstream/dropstream/avail"
)

// AppendEntity appends the JSON encoding of e to dst: the bytes
// json.Marshal(e) returns.
func AppendEntity(dst []byte, e avail.Entity) []byte {
	dst = append(dst, `{"key":`...)
	dst = appendString(dst, e.Key)
	dst = append(dst, `,"kind":`...)
	dst = appendString(dst, e.Kind)
	dst = append(dst, `,"provider":`...)
	dst = appendString(dst, e.Provider)
	dst = append(dst, `,"venue":`...)
	dst = appendString(dst, e.Venue)
	if e.VenueName != "" {
		dst = append(dst, `,"venue_name":`...)
		dst = appendString(dst, e.VenueName)
	}
	if e.Date != "" {
		dst = append(dst, `,"date":`...)
		dst = appendString(dst, e.Date)
	}
	if e.Time != "" {
		dst = append(dst, `,"time":`...)
		dst = appendString(dst, e.Time)
	}
	if e.PartySize != 0 {
		dst = append(dst, `,"party_size":`...)
		dst = strconv.AppendInt(dst, int64(e.PartySize), 10)
	}
	if len(e.Attrs) > 0 {
		dst = append(dst, `,"attrs":`...)
		dst = appendAttrs(dst, e.Attrs)
	}
	return append(dst, '}')
}

// appendString appends s quoted as encoding/json quotes it. Strings that
// need no escape are copied; the others are encoded by encoding/json.
func appendString(dst []byte, s string) []byte {
	if !plain(s) {
		b, _ := json.Marshal(s) // a string always encodes
		return append(dst, b...)
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// plain reports whether encoding/json writes s unchanged between quotes.
func plain(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			return false
		}
		i += size
	}
	return true
}

// AppendEntityExtras appends as one JSON object e's venue_name and attrs,
// which avail.ParseKey cannot rebuild from the key.
func AppendEntityExtras(dst []byte, e avail.Entity) []byte {
	dst = append(dst, '{')
	if e.VenueName != "" {
		dst = append(dst, `"venue_name":`...)
		dst = appendString(dst, e.VenueName)
	}
	if len(e.Attrs) > 0 {
		if e.VenueName != "" {
			dst = append(dst, ',')
		}
		dst = append(dst, `"attrs":`...)
		dst = appendAttrs(dst, e.Attrs)
	}
	return append(dst, '}')
}

// appendAttrs appends attrs as an object with sorted keys, as
// encoding/json does.
func appendAttrs(dst []byte, attrs map[string]string) []byte {
	var keys [8]string
	names := keys[:0]
	for k := range attrs {
		names = append(names, k)
	}
	slices.Sort(names)
	dst = append(dst, '{')
	for i, k := range names {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, k)
		dst = append(dst, ':')
		dst = appendString(dst, attrs[k])
	}
	return append(dst, '}')
}
