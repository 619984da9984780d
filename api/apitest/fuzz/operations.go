package fuzz

import (
	"net/url"
	"slices"
	"strings"

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
