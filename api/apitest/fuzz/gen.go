package fuzz

import (
	"encoding/json"
	"math/rand/v2"
	"net/url"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

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
