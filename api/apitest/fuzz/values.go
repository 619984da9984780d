package fuzz

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
)

// whatOversized names the case of a body over the server's limit.
const whatOversized = "body oversized"

// Bad strings: control, bidirectional and combining characters, emoji,
// invalid UTF-8 (as the JSON decoder sees it), SQL-ish and path-ish text.
var badStrings = []string{
	"", " ", "\x00", "a\x00b", "\x07\r\n\t", "\u202Eevil", "\u2066x\u2069", "e\u0301\u0301\u0301", "🦄💥",
	"\uFEFF", "\uFFFD", "' OR 1=1 --", "../../etc/passwd", "%00", "${jndi:x}", "<script>x</script>",
	strings.Repeat("x", 10_000), strings.Repeat("é", 5_000),
}

// Bad path segments, already escaped.
var badSegments = []string{
	"%00", "%0A", "%E2%80%AE", "..%2F..", "%FF", "%C0%AF", "-1", "0", "99999999999999999999", "1e400", "NaN",
	"%20", "%F0%9F%A6%84", strings.Repeat("a", 5_000), "x%2Fy", "a%3Fb", "%25",
}

// Bad query values, unescaped.
var badQueryValues = []string{
	"", "abc", "-1", "0", "1.5", "1e400", "99999999999999999999", "-99999999999999999999", "NaN", "true",
	"\x00", "\u202E", "\xff", strings.Repeat("q", 10_000), "2026-13-45", "../x",
}

// Bad JSON numbers.
var badNumbers = []string{"-1", "0", "-0", "1.5", "1e308", "-1e308", "1e-320", "9223372036854775808",
	"-9223372036854775809", "18446744073709551616", "123456789012345678901234567890"}

// Bodies that are not the object asked for.
var badBodies = []string{"", "{", `{"a":`, "nul", "null", "[]", `"text"`, "123", "true", "{}", "{}{}",
	`{"a":1}x`, "\xff\xfe", "[{}]"}

// value returns a valid-looking value of a schema, depth-bounded.
func (g *generator) value(s *openapi3.Schema, name string, depth int) any {
	if s == nil || depth > 6 {
		return "x"
	}
	if len(s.AllOf) > 0 && s.AllOf[0].Value != nil {
		return g.value(s.AllOf[0].Value, name, depth)
	}
	switch {
	case s.Type.Is(openapi3.TypeObject) || len(s.Properties) > 0:
		out := map[string]any{}
		for _, prop := range sortedKeys(s.Properties) {
			if p := s.Properties[prop].Value; p != nil && !p.ReadOnly {
				out[prop] = g.value(p, prop, depth+1)
			}
		}
		return out
	case s.Type.Is(openapi3.TypeArray):
		if s.Items == nil {
			return []any{}
		}
		return []any{g.value(s.Items.Value, name, depth+1)}
	case s.Type.Is(openapi3.TypeInteger):
		return 1 + g.rng.IntN(3)
	case s.Type.Is(openapi3.TypeNumber):
		return 1.5
	case s.Type.Is(openapi3.TypeBoolean):
		return g.rng.IntN(2) == 0
	case s.Type.Is(openapi3.TypeString):
		switch {
		case s.Format == "date-time":
			return time.Date(2026, 12, 1, 19, 0, 0, 0, time.UTC).Format(time.RFC3339)
		case strings.Contains(name, "url"):
			return "http://127.0.0.1:9/fuzz"
		case strings.Contains(name, "email") || name == "address":
			return "fuzz@example.com"
		case strings.Contains(name, "date"):
			return "2026-12-01"
		}
		if vs := g.seen[name]; len(vs) > 0 {
			return vs[g.rng.IntN(len(vs))]
		}
		return "fuzz" + string(rune('a'+g.rng.IntN(26)))
	}
	return "x"
}

// badValues are values a property of schema s should refuse, or at least
// not break on.
func (g *generator) badValues(s *openapi3.Schema) []any {
	s = resolve(s)
	out := []any{nil, map[string]any{"deep": nest(200)}}
	switch {
	case s.Type.Is(openapi3.TypeString):
		out = append(out, 123, true, []any{"a"}, map[string]any{})
		for _, b := range badStrings {
			out = append(out, b)
		}
	case s.Type.Is(openapi3.TypeInteger), s.Type.Is(openapi3.TypeNumber):
		out = append(out, "abc", "1", true, []any{1})
		for _, n := range badNumbers {
			out = append(out, json.RawMessage(n))
		}
	case s.Type.Is(openapi3.TypeBoolean):
		out = append(out, "yes", 1, []any{})
	case s.Type.Is(openapi3.TypeArray):
		out = append(out, "a", 1, map[string]any{}, []any{nil}, []any{1, "a", true}, make([]any, 10_000))
	case s.Type.Is(openapi3.TypeObject):
		out = append(out, "a", 1, []any{}, map[string]any{"": ""})
	}
	return out
}

// resolve follows an allOf wrapper to the schema it wraps.
func resolve(s *openapi3.Schema) *openapi3.Schema {
	if s != nil && len(s.AllOf) == 1 && s.AllOf[0].Value != nil {
		return s.AllOf[0].Value
	}
	if s == nil {
		return &openapi3.Schema{}
	}
	return s
}

// nest returns arrays nested depth deep.
func nest(depth int) any {
	var v any = 1
	for range depth {
		v = []any{v}
	}
	return v
}

func cloneMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
