package api

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/gofiber/fiber/v2"
)

// span is raw JSON that describes itself: a number or {"from": n}.
type span json.RawMessage

func (s span) MarshalJSON() ([]byte, error) { return json.RawMessage(s).MarshalJSON() }

func (span) OpenAPISchema() map[string]any {
	return map[string]any{"oneOf": []any{
		map[string]any{"type": "integer"},
		map[string]any{"type": "object", "required": []string{"from"}, "additionalProperties": false,
			"properties": map[string]any{"from": map[string]any{"type": "integer"}}},
	}}
}

type spanned struct {
	Exact span   `json:"exact"`
	Opt   span   `json:"opt,omitempty"`
	Ptr   *span  `json:"ptr"`
	List  []span `json:"list"`
}

// TestSchemaSet_typeSuppliesItsOwnSchema: a Schemer's schema is published
// once as a component of its name and referenced from every field of its
// type; the field is nullable only as a pointer, and the
// document stays valid OpenAPI 3 whose schema accepts and refuses values
// as the type says.
func TestSchemaSet_typeSuppliesItsOwnSchema(t *testing.T) {
	srv, err := New(Config{APIKeys: "w:write"})
	if err != nil {
		t.Fatal(err)
	}
	srv.Handle(Operation{Method: "POST", Path: "/v1/spans", Summary: "Create a span", Scope: ScopeWrite,
		Body: spanned{}, Response: spanned{}, Status: http.StatusCreated,
		Handler: func(c *fiber.Ctx) error { return c.SendStatus(http.StatusCreated) }})
	data, err := json.Marshal(srv.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("not valid OpenAPI 3: %v", err)
	}
	comp := doc.Components.Schemas["span"]
	if comp == nil || len(comp.Value.OneOf) != 2 {
		t.Fatalf("span component = %+v, want its own oneOf", comp)
	}
	props := doc.Components.Schemas["spanned"].Value.Properties
	for _, tc := range []struct {
		field    string
		nullable bool
	}{{"exact", false}, {"opt", false}, {"ptr", true}} {
		p := props[tc.field]
		ref := p.Ref
		if len(p.Value.AllOf) == 1 {
			ref = p.Value.AllOf[0].Ref
		}
		if ref != "#/components/schemas/span" || p.Value.Nullable != tc.nullable {
			t.Errorf("%s: $ref %q nullable %v, want the span component, nullable %v", tc.field, ref, p.Value.Nullable, tc.nullable)
		}
	}
	if items := props["list"].Value.Items; items == nil || items.Ref != "#/components/schemas/span" {
		t.Errorf("list items = %+v, want the span component", items)
	}
	for _, tc := range []struct {
		value string
		ok    bool
	}{
		{`3`, true}, {`{"from": 3}`, true}, {`"3"`, false}, {`{"to": 3}`, false}, {`null`, false},
	} {
		var v any
		if err := json.Unmarshal([]byte(tc.value), &v); err != nil {
			t.Fatal(err)
		}
		if err := comp.Value.VisitJSON(v); (err == nil) != tc.ok {
			t.Errorf("span %s: %v, want accepted %v", tc.value, err, tc.ok)
		}
	}
}
