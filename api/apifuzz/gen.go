package apifuzz

import (
	"encoding/json"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
)

// operation is one documented operation, as the generator needs it.
type operation struct {
	method, path string // path as documented: "/v1/feeds/{id}"
	pathParams   []*openapi3.Parameter
	query        []*openapi3.Parameter
	body         *openapi3.Schema // nil: no JSON body
	// htmlErrors: the operation documents errors as a page too.
	htmlErrors bool
}

func (o operation) String() string { return o.method + " " + o.path }

// operations lists the document's operations, sorted, but those skip
// reports and those whose success answer is a stream.
func operations(doc *openapi3.T, skip func(method, path string) bool) []operation {
	var out []operation
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if skip != nil && skip(method, path) || streams(op) {
				continue
			}
			o := operation{method: method, path: path}
			for _, p := range slices.Concat(item.Parameters, op.Parameters) {
				switch p.Value.In {
				case openapi3.ParameterInPath:
					o.pathParams = append(o.pathParams, p.Value)
				case openapi3.ParameterInQuery:
					o.query = append(o.query, p.Value)
				}
			}
			if rb := op.RequestBody; rb != nil && rb.Value != nil {
				if mt := rb.Value.Content.Get("application/json"); mt != nil && mt.Schema != nil {
					o.body = mt.Schema.Value
				}
			}
			if r := op.Responses.Status(400); r != nil && r.Value != nil {
				for media := range r.Value.Content {
					o.htmlErrors = o.htmlErrors || strings.HasPrefix(media, "text/html")
				}
			}
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b operation) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// streams reports whether an operation's success answer is a stream.
func streams(op *openapi3.Operation) bool {
	for code, r := range op.Responses.Map() {
		if strings.HasPrefix(code, "2") && r.Value != nil && r.Value.Content.Get("text/event-stream") != nil {
			return true
		}
	}
	return false
}

// fuzzCase is one request to send.
type fuzzCase struct {
	op          operation
	what        string // the mutation, for the report
	pathValues  map[string]string
	query       url.Values
	body        []byte // nil: no body
	contentType string
}

// url returns the case's path and query, escaped.
func (c fuzzCase) url() string {
	path := c.op.path
	for name, v := range c.pathValues {
		path = strings.ReplaceAll(path, "{"+name+"}", v)
	}
	if len(c.query) > 0 {
		path += "?" + c.query.Encode()
	}
	return path
}

// generator makes the cases of operations from the document's schemas, the
// seed and the values seen in the server's answers.
type generator struct {
	rng       *rand.Rand
	bodyLimit int
	// seen are values of path parameters taken from answers, by name.
	seen map[string][]string
	// examples are stored objects listed at a path (GET's items): the
	// base of the bodies sent to the same path, more valid than made-up
	// ones, so mutations reach past the first check.
	examples map[string][]map[string]any
}

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

// pathValues returns plausible path parameter values: seen ones when any.
func (g *generator) pathValues(op operation) map[string]string {
	out := map[string]string{}
	for _, p := range op.pathParams {
		v := "x1"
		if vs := g.seen[p.Name]; len(vs) > 0 && g.rng.IntN(4) > 0 {
			v = url.PathEscape(vs[g.rng.IntN(len(vs))])
		} else if p.Schema != nil && p.Schema.Value != nil && p.Schema.Value.Type.Is(openapi3.TypeInteger) {
			v = "1"
		}
		out[p.Name] = v
	}
	return out
}

// base returns a case with plausible parameters and body.
func (g *generator) base(op operation, what string) fuzzCase {
	c := fuzzCase{op: op, what: what, pathValues: g.pathValues(op), query: url.Values{}}
	for _, q := range op.query {
		if q.Required {
			c.query.Set(q.Name, g.queryValue(q))
		}
	}
	if op.body != nil {
		c.body, _ = json.Marshal(g.bodyValue(op))
		c.contentType = "application/json"
	}
	return c
}

// bodyValue is a body for op: a stored object of its path, writable fields
// only, when one is listed, else one made from the schema.
func (g *generator) bodyValue(op operation) any {
	if ex := g.examples[op.path]; len(ex) > 0 && g.rng.IntN(4) > 0 {
		out := map[string]any{}
		for k, v := range ex[g.rng.IntN(len(ex))] {
			if p := op.body.Properties[k]; p != nil && p.Value != nil && !p.Value.ReadOnly {
				out[k] = v
			}
		}
		return out
	}
	return g.value(op.body, "", 0)
}

func (g *generator) queryValue(q *openapi3.Parameter) string {
	if q.Schema != nil && q.Schema.Value != nil {
		switch {
		case q.Schema.Value.Type.Is(openapi3.TypeInteger):
			return "2"
		case q.Schema.Value.Type.Is(openapi3.TypeBoolean):
			return "true"
		}
	}
	if vs := g.seen[q.Name]; len(vs) > 0 {
		return vs[g.rng.IntN(len(vs))]
	}
	return "fuzz"
}

// systematic returns every mutation of op once: each bad path segment in
// each path parameter, each bad value in each query parameter, each bad
// body, each required field missing, and each property given a wrong
// type, an out-of-range number, a bad string, null, deep nesting.
func (g *generator) systematic(op operation) []fuzzCase {
	var out []fuzzCase
	for _, p := range op.pathParams {
		for _, seg := range badSegments {
			c := g.base(op, "path "+p.Name)
			c.pathValues[p.Name] = seg
			out = append(out, c)
		}
	}
	for _, q := range op.query {
		for _, v := range badQueryValues {
			c := g.base(op, "query "+q.Name)
			c.query.Set(q.Name, v)
			out = append(out, c)
		}
		c := g.base(op, "query "+q.Name+" repeated")
		c.query[q.Name] = []string{"1", "2", "abc"}
		out = append(out, c)
	}
	for _, q := range op.query {
		if q.Required {
			c := g.base(op, "query "+q.Name+" missing")
			c.query.Del(q.Name)
			out = append(out, c)
		}
	}
	if op.body == nil {
		return out
	}
	for _, b := range badBodies {
		c := g.base(op, "body not the object")
		c.body = []byte(b)
		out = append(out, c)
	}
	out = append(out, g.wholeBodies(op)...)
	obj, _ := g.bodyValue(op).(map[string]any)
	if obj == nil {
		return out
	}
	for _, req := range op.body.Required {
		if p := op.body.Properties[req]; p != nil && p.Value != nil && p.Value.ReadOnly {
			continue
		}
		m := cloneMap(obj)
		delete(m, req)
		out = append(out, g.withBody(op, "body missing "+req, m))
	}
	for _, prop := range sortedKeys(op.body.Properties) {
		ps := op.body.Properties[prop].Value
		if ps == nil || ps.ReadOnly {
			continue
		}
		for _, bad := range g.badValues(ps) {
			m := cloneMap(obj)
			m[prop] = bad
			out = append(out, g.withBody(op, "body "+prop, m))
		}
		// One level down: the nested object's own properties.
		if nested, ok := obj[prop].(map[string]any); ok {
			for _, sub := range sortedKeys(resolve(ps).Properties) {
				ss := resolve(ps).Properties[sub].Value
				if ss == nil || ss.ReadOnly {
					continue
				}
				for _, bad := range g.badValues(ss) {
					m, n := cloneMap(obj), cloneMap(nested)
					n[sub] = bad
					m[prop] = n
					out = append(out, g.withBody(op, "body "+prop+"."+sub, m))
				}
			}
		}
		if items, ok := obj[prop].([]any); ok && len(items) > 0 {
			if first, ok := items[0].(map[string]any); ok && ps.Items != nil {
				is := resolve(ps.Items.Value)
				for _, sub := range sortedKeys(is.Properties) {
					for _, bad := range g.badValues(is.Properties[sub].Value) {
						m, n := cloneMap(obj), cloneMap(first)
						n[sub] = bad
						m[prop] = []any{n}
						out = append(out, g.withBody(op, "body "+prop+"[]."+sub, m))
					}
				}
			}
		}
	}
	return out
}

// wholeBodies are the bodies that test the server's limits: oversized,
// deeply nested, duplicated keys, unknown fields, a wrong content type.
func (g *generator) wholeBodies(op operation) []fuzzCase {
	var out []fuzzCase
	big := g.base(op, whatOversized)
	big.body = []byte(`{"x":"` + strings.Repeat("a", g.bodyLimit+1) + `"}`)
	out = append(out, big)
	nearLimit := g.base(op, "body just under the limit")
	nearLimit.body = []byte(`{"x":"` + strings.Repeat("a", g.bodyLimit-64) + `"}`)
	out = append(out, nearLimit)
	for _, depth := range []int{64, 1_000, 100_000} {
		c := g.base(op, "body nested arrays")
		c.body = []byte(strings.Repeat("[", depth) + strings.Repeat("]", depth))
		out = append(out, c)
		c = g.base(op, "body nested objects")
		c.body = []byte(strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth))
		out = append(out, c)
	}
	c := g.base(op, "body duplicate keys")
	if len(c.body) > 2 && c.body[0] == '{' {
		c.body = append([]byte(`{"x":1,"x":"y",`), c.body[1:]...)
		if string(c.body) == `{"x":1,"x":"y",}` {
			c.body = []byte(`{"x":1,"x":"y"}`)
		}
	}
	out = append(out, c)
	c = g.base(op, "body unknown field")
	if m, ok := g.value(op.body, "", 0).(map[string]any); ok {
		m["no_such_field"] = 1
		c.body, _ = json.Marshal(m)
	}
	out = append(out, c)
	c = g.base(op, "body as text/plain")
	c.contentType = "text/plain"
	out = append(out, c)
	c = g.base(op, "body without content type")
	c.contentType = ""
	out = append(out, c)
	return out
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

// random returns a case mixing mutations at random: bad parameters, a
// body with a few properties changed, seen values in place of others.
func (g *generator) random(op operation) fuzzCase {
	c := g.base(op, "random")
	for _, p := range op.pathParams {
		if g.rng.IntN(3) == 0 {
			c.pathValues[p.Name] = badSegments[g.rng.IntN(len(badSegments))]
		}
	}
	for _, q := range op.query {
		if g.rng.IntN(3) == 0 {
			c.query.Set(q.Name, badQueryValues[g.rng.IntN(len(badQueryValues))])
		}
	}
	if op.body == nil {
		return c
	}
	c.body, _ = json.Marshal(g.mutate(g.bodyValue(op), op.body, 0))
	return c
}

// mutate changes a valid-looking value of schema s at random, at any
// depth: a field or element replaced by a bad value, left out, repeated.
func (g *generator) mutate(v any, s *openapi3.Schema, depth int) any {
	s = resolve(s)
	if g.rng.IntN(8) == 0 || depth > 8 {
		bad := g.badValues(s)
		return bad[g.rng.IntN(len(bad))]
	}
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for _, k := range sortedKeys(x) {
			p := s.Properties[k]
			switch {
			case p == nil || p.Value == nil || p.Value.ReadOnly:
				out[k] = x[k]
			case g.rng.IntN(10) == 0:
				// left out
			default:
				out[k] = g.mutate(x[k], p.Value, depth+1)
			}
		}
		return out
	case []any:
		var items *openapi3.Schema
		if s.Items != nil {
			items = s.Items.Value
		}
		out := make([]any, 0, len(x)+1)
		for _, e := range x {
			out = append(out, g.mutate(e, items, depth+1))
		}
		if len(out) > 0 && g.rng.IntN(10) == 0 {
			out = append(out, out[0]) // a repeated element
		}
		return out
	}
	return v
}

func (g *generator) withBody(op operation, what string, body map[string]any) fuzzCase {
	c := g.base(op, what)
	c.body, _ = json.Marshal(body)
	return c
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
