package httpapi_test

import (
	"encoding/json"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/dropstream/dropstream/api/apitest"
	"github.com/dropstream/dropstream/flows/comic"
)

// TestOpenAPI_subscriptionBodyIsDescribedExactly: the served document is
// valid OpenAPI 3 and its subscription body schema, the same in the
// request and the answer, accepts and refuses bodies as the validator
// does: a value or a range for grade, issue, price_cents and year, exact
// values for the rest.
func TestOpenAPI_subscriptionBodyIsDescribedExactly(t *testing.T) {
	srv, _, _ := newServer(t, false)
	doc := apitest.Document(t, srv).Doc
	op := doc.Paths.Find("/v1/subscriptions").Post
	for name, sch := range map[string]*openapi3.SchemaRef{
		"request":  op.RequestBody.Value.Content.Get("application/json").Schema,
		"response": op.Responses.Status(201).Value.Content.Get("application/json").Schema,
	} {
		if ref := sch.Value.Properties["body"].Ref; ref != "#/components/schemas/BodyJSON" {
			t.Errorf("%s body = %q, want the BodyJSON component", name, ref)
		}
	}
	body := doc.Components.Schemas["BodyJSON"].Value
	for _, tc := range []struct {
		name, body string
		ok         bool
	}{
		{"empty: every comic", `{}`, true},
		{"exact values", `{"series":"The Amazing Spider-Man","issue":"121","grade":9.4,"year":1973,"key_issue":true}`, true},
		{"every ranged field a range", `{"grade":{"gte":9},"issue":{"lte":12,"suffix":"A"},"price_cents":{"gte":0,"lte":40000},"year":{"gte":1960}}`, true},
		{"grade range in tenths", `{"grade":{"gte":9.2,"lte":9.8}}`, true},
		{"unknown field", `{"color":"red"}`, false},
		{"range of an exact field", `{"publisher":{"gte":1}}`, false},
		{"empty range", `{"year":{}}`, false},
		{"suffix alone", `{"issue":{"suffix":"A"}}`, false},
		{"unknown operator", `{"year":{"gt":1960}}`, false},
		{"bound past the limit", `{"year":{"gte":1800}}`, false},
		{"integer bound a fraction", `{"price_cents":{"lte":10.5}}`, false},
		{"year a string", `{"year":"1973"}`, false},
		{"grade off the scale", `{"grade":9.3}`, false},
		{"null value", `{"grade":null}`, false},
		{"padded string", `{"series":" Spider-Man"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v any
			if err := json.Unmarshal([]byte(tc.body), &v); err != nil {
				t.Fatal(err)
			}
			if err := body.VisitJSON(v); (err == nil) != tc.ok {
				t.Errorf("schema on %s: %v, want accepted %v", tc.body, err, tc.ok)
			}
			if _, err := comic.ParseBody([]byte(tc.body)); (err == nil) != tc.ok {
				t.Errorf("ParseBody(%s): %v, want accepted %v", tc.body, err, tc.ok)
			}
		})
	}
}
