package api

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
)

type thing struct {
	ID    string            `json:"id"`
	Count int               `json:"count,omitempty"`
	Tags  []string          `json:"tags,omitempty"`
	Seen  time.Time         `json:"seen"`
	Attrs map[string]string `json:"attrs,omitempty"`
	Child *thing            `json:"child,omitempty"`
	Skip  string            `json:"-"`
}

// TestOpenAPI_documentsHandledRoutes registers documented routes and checks
// that they serve, keep their scope, and appear in /openapi.json with
// parameters, body, response and error schemas.
func TestOpenAPI_documentsHandledRoutes(t *testing.T) {
	srv, err := New(Config{APIKeys: "r:read;w:write"})
	if err != nil {
		t.Fatal(err)
	}
	srv.Handle(Operation{Method: "GET", Path: "/v1/things/:id", Summary: "Get a thing", Tag: "things", Scope: ScopeRead,
		Query: []Param{{Name: "limit", Type: "integer", Description: "page size"}}, Response: thing{},
		Handler: func(c *fiber.Ctx) error { return c.JSON(thing{ID: c.Params("id")}) }})
	srv.Handle(Operation{Method: "POST", Path: "/v1/things", Summary: "Create a thing", Scope: ScopeWrite,
		Body: thing{}, Response: thing{}, Status: http.StatusCreated,
		Handler: func(c *fiber.Ctx) error { return c.Status(http.StatusCreated).JSON(thing{ID: "new"}) }})
	for _, tc := range []struct {
		method, path, key string
		want              int
	}{
		{"GET", "/v1/things/a", "r", 200},
		{"GET", "/v1/things/a", "", 401},
		{"POST", "/v1/things", "r", 403},
		{"POST", "/v1/things", "w", 201},
		{"GET", "/openapi.json", "", 200},
	} {
		req := httptest.NewRequest(tc.method, tc.path, nil)
		if tc.key != "" {
			req.Header.Set(HeaderAPIKey, tc.key)
		}
		resp, err := srv.App().Test(req)
		if err != nil || resp.StatusCode != tc.want {
			t.Errorf("%s %s with key %q: %v %v, want %d", tc.method, tc.path, tc.key, resp.StatusCode, err, tc.want)
		}
	}
	resp, err := srv.App().Test(httptest.NewRequest("GET", "/openapi.json", nil))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	var doc struct {
		OpenAPI    string                                `json:"openapi"`
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]struct {
				Properties map[string]map[string]any `json:"properties"`
				Required   []string                  `json:"required"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if doc.OpenAPI != "3.0.3" {
		t.Errorf("openapi version %q", doc.OpenAPI)
	}
	for path, method := range map[string]string{"/v1/things/{id}": "get", "/v1/things": "post", "/healthz": "get",
		"/readyz": "get", "/openapi.json": "get"} {
		if _, ok := doc.Paths[path][method]; !ok {
			t.Errorf("no %s %s in the document", method, path)
		}
	}
	if _, ok := doc.Paths["/metrics"]; ok {
		t.Error("/metrics documented though the server has no metrics handler")
	}
	var get struct {
		Parameters []struct {
			Name, In        string
			AllowEmptyValue bool `json:"allowEmptyValue"`
		} `json:"parameters"`
		Responses map[string]json.RawMessage `json:"responses"`
	}
	_ = json.Unmarshal(doc.Paths["/v1/things/{id}"]["get"], &get)
	if len(get.Parameters) != 2 || get.Parameters[0].Name != "id" || get.Parameters[0].In != "path" || get.Parameters[1].Name != "limit" ||
		!get.Parameters[1].AllowEmptyValue {
		t.Errorf("parameters = %+v, want path id and query limit (empty allowed: as if absent)", get.Parameters)
	}
	if _, ok := get.Responses["4XX"]; !ok {
		t.Error("no 4XX error response")
	}
	th := doc.Components.Schemas["thing"]
	if th.Properties["seen"]["format"] != "date-time" || th.Properties["tags"]["type"] != "array" || fmt.Sprint(th.Properties["child"]["allOf"]) != "[map[$ref:#/components/schemas/thing]]" ||
		th.Properties["count"]["nullable"] != true || th.Properties["id"]["nullable"] != nil {
		t.Errorf("thing schema = %+v", th.Properties)
	}
	if _, ok := th.Properties["Skip"]; ok {
		t.Error("field tagged json:\"-\" documented")
	}
	if len(th.Required) != 2 {
		t.Errorf("required = %v, want id and seen", th.Required)
	}
	if _, ok := doc.Components.Schemas["Error"]; !ok {
		t.Error("no Error schema")
	}
}

type written struct {
	ID      string          `json:"id" openapi:"readonly"`
	Name    string          `json:"name"`
	Mode    string          `json:"mode" openapi:"optional"`
	Body    json.RawMessage `json:"body"`
	Tags    []string        `json:"tags"`
	Created time.Time       `json:"created_at" openapi:"readonly"`
	Child   *thing          `json:"child" openapi:"readonly"`
}

// TestSchemaSet_fieldsAndNames checks what the document says of fields
// (server-set ones readOnly, defaulted ones optional, raw JSON any value,
// nil slices nullable) and that two Go types of one name get distinct
// component names qualified by their packages.
func TestSchemaSet_fieldsAndNames(t *testing.T) {
	s := newSchemaSet(written{}, Page[Error]{}, Page[url.Error]{}, url.Error{}, Error{})
	w := s.components["written"].Value
	props := w.Properties
	if !props["id"].Value.ReadOnly || !props["created_at"].Value.ReadOnly {
		t.Errorf("server-set fields not readOnly: %v", props)
	}
	if child := props["child"].Value; !child.ReadOnly || !child.Nullable || len(child.AllOf) != 1 {
		t.Errorf("child = %+v, want a readOnly nullable allOf of the reference", child)
	}
	if body := props["body"].Value; !body.IsEmpty() {
		t.Errorf("raw JSON body schema = %+v, want any value", body)
	}
	if !props["tags"].Value.Nullable {
		t.Errorf("tags = %+v, want nullable (a nil slice encodes as null)", props["tags"].Value)
	}
	if !slices.Equal(w.Required, []string{"id", "name", "body", "tags", "created_at", "child"}) {
		t.Errorf("required = %v", w.Required)
	}
	for _, tc := range []struct {
		v    any
		want string
	}{
		{Error{}, "api.Error"}, {url.Error{}, "url.Error"},
		{Page[Error]{}, "Page.api.Error"}, {Page[url.Error]{}, "Page.url.Error"}, {written{}, "written"},
	} {
		v, want := tc.v, tc.want
		if ref := s.of(v).Ref; ref != "#/components/schemas/"+want {
			t.Errorf("%T: $ref %v, want %s", v, ref, want)
		}
	}
	if got := qualifiedName(reflect.TypeOf(Page[thing]{}), 0); got != "Pagething" {
		t.Errorf("generic name = %q", got)
	}
}
