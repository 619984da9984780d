package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/api/apitest"
)

// binaryAPI returns the API of the binary over an embedded Redis, without
// ClickHouse, with every flow's routes, and its app, closed when the test
// ends.
func binaryAPI(t *testing.T) *api.Server {
	t.Helper()
	return binaryAPIWith(t, func(*Config) {})
}

// binaryAPIWith is binaryAPI with its configuration edited by edit.
func binaryAPIWith(t *testing.T, edit func(*Config)) *api.Server {
	t.Helper()
	_, srv := binaryApp(t, edit, nil)
	return srv
}

// binaryApp is binaryAPIWith with flow variables set, and its app.
func binaryApp(t *testing.T, edit func(*Config), vars map[string]string) (*app, *api.Server) {
	t.Helper()
	clearEnv(t)
	cfg := Config{Partitions: 2, APIAddr: "127.0.0.1:0", LogFormat: "json", LogLevel: "error"}
	edit(&cfg)
	a, err := newAppWith(context.Background(), cfg, vars, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.close)
	if _, err := a.stages(); err != nil {
		t.Fatal(err)
	}
	srv, err := a.apiServer()
	if err != nil {
		t.Fatal(err)
	}
	return a, srv
}

// routeParam matches a Fiber path parameter.
var routeParam = regexp.MustCompile(`:[A-Za-z0-9_]+\??`)

// concrete fills a route pattern's parameters with plausible values.
func concrete(pattern string) string {
	return routeParam.ReplaceAllString(pattern, "x1")
}

// call sends a request to srv and returns the status and body; the
// exchange is checked against the binary's OpenAPI document.
func call(t *testing.T, srv *api.Server, method, path, body string) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, r)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res := apitest.Do(t, srv, req)
	return res.Status, res.Body
}

// The binary's whole document, every flow's routes registered, is valid
// OpenAPI 3, and documents every route the server answers but HEAD.
func TestAPI_documentIsValidOpenAPI3(t *testing.T) {
	srv := binaryAPI(t)
	doc := apitest.Document(t, srv)
	routes := 0
	for _, r := range srv.App().GetRoutes(true) {
		if r.Method == http.MethodHead || r.Path == "/" {
			continue
		}
		routes++
		path := routeParam.ReplaceAllStringFunc(r.Path, func(p string) string { return "{" + strings.Trim(p, ":?") + "}" })
		if item := doc.Doc.Paths.Find(path); item == nil || item.GetOperation(r.Method) == nil {
			t.Errorf("%s %s is not in the document", r.Method, r.Path)
		}
	}
	if n := doc.Operations(); n != routes || n < 70 {
		t.Errorf("the document has %d operations, the server %d routes", n, routes)
	}
	t.Logf("%d operations", doc.Operations())

	// Each route's own types: the notifier's subscriber destinations (no
	// url) are not the feed's, a feed subscription is not a comic one.
	body := func(path, method string) *openapi3.Schema {
		return doc.Doc.Paths.Find(path).GetOperation(method).RequestBody.Value.Content.Get("application/json").Schema.Value
	}
	dest := body("/v1/subscribers", http.MethodPost).Properties["destinations"].Value.Items.Value
	if _, ok := dest.Properties["url"]; ok || dest.Properties["id"] == nil || !dest.Properties["id"].Value.ReadOnly {
		t.Errorf("POST /v1/subscribers destinations = %v, want the notifier's destination with a readOnly id", dest.Properties)
	}
	if _, ok := body("/v1/feeds/{id}/subscribables/{name}/subscriptions", http.MethodPost).Properties["destination"].Value.Properties["url"]; !ok {
		t.Error("a feed subscription's destination has no url")
	}
	feedSub := doc.Doc.Paths.Find("/v1/feeds/{id}/subscribables/{name}/subscriptions").Post.Responses.Status(http.StatusCreated).Value.Content.Get("application/json").Schema
	if feedSub.Ref != "#/components/schemas/feed.Subscription" {
		t.Errorf("a feed subscription is documented as %s", feedSub.Ref)
	}
	// No raw JSON documented as base64, no server-set field required in a request.
	for name, sch := range doc.Doc.Components.Schemas {
		for prop, p := range sch.Value.Properties {
			if p.Value.Format == "byte" {
				t.Errorf("%s.%s is documented as base64", name, prop)
			}
		}
	}
	// A source's interval is a duration string, as its JSON says.
	if p := body("/v1/sources", http.MethodPost).Properties["interval"]; p == nil || !p.Value.Type.Is(openapi3.TypeString) {
		t.Errorf("a source's interval is not documented as a string: %v", p)
	}
	watcher := body("/v1/watchers", http.MethodPost)
	for _, field := range []string{"id", "created_at"} {
		if p := watcher.Properties[field]; p == nil || !p.Value.ReadOnly {
			t.Errorf("watcher %s is not readOnly", field)
		}
	}
}

// Every GET route of the binary answers HEAD as it answers GET, without a
// body.
func TestAPI_headOnEveryGetRoute(t *testing.T) {
	srv := binaryAPI(t)
	var n int
	for _, r := range srv.App().GetRoutes(true) {
		if r.Method != http.MethodGet {
			continue
		}
		n++
		path := concrete(r.Path)
		t.Run(r.Path, func(t *testing.T) {
			getStatus, _ := call(t, srv, http.MethodGet, path, "")
			headStatus, body := call(t, srv, http.MethodHead, path, "")
			if headStatus != getStatus || len(body) != 0 {
				t.Errorf("HEAD %s = %d with %d bytes; GET = %d", path, headStatus, len(body), getStatus)
			}
		})
	}
	if n < 30 {
		t.Fatalf("walked %d GET routes, want every flow's", n)
	}
}

// Routes whose backend is not configured stay documented and say so with
// 503 not_configured, not 404.
func TestAPI_statsWithoutClickHouseAre503NotConfigured(t *testing.T) {
	srv := binaryAPI(t)
	paths := srv.OpenAPI().Paths
	for _, path := range []string{"/v1/stats/availability", "/v1/stats/notifications"} {
		if paths.Value(path) == nil {
			t.Errorf("%s missing from /openapi.json", path)
		}
		status, body := call(t, srv, http.MethodGet, path, "")
		var env struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if status != http.StatusServiceUnavailable || json.Unmarshal(body, &env) != nil || env.Error.Code != api.CodeNotConfigured {
			t.Errorf("GET %s = %d %s, want 503 %s", path, status, body, api.CodeNotConfigured)
		}
	}
}

// checkMessage fails the test unless body is an error envelope whose
// message a client can read: one line, no repeated prefix, no Go names.
func checkMessage(t *testing.T, what string, status int, body []byte) string {
	t.Helper()
	var env struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if status < 400 || status > 499 || json.Unmarshal(body, &env) != nil || env.Error.Code == "" || env.Error.Message == "" {
		t.Errorf("%s = %d %s, want a 4xx error envelope", what, status, body)
		return ""
	}
	msg := env.Error.Message
	if strings.ContainsAny(msg, "\r\n") {
		t.Errorf("%s: message has a newline: %q", what, msg)
	}
	for _, goName := range []string{"Go struct", "Go value", "of type", "json: ", "Fields.", "main.", "UnmarshalJSON"} {
		if strings.Contains(msg, goName) {
			t.Errorf("%s: message names Go internals (%q): %q", what, goName, msg)
		}
	}
	parts := strings.Split(msg, ": ")
	for i := 1; i < len(parts); i++ {
		if strings.EqualFold(parts[i], parts[i-1]) {
			t.Errorf("%s: message repeats %q: %q", what, parts[i], msg)
		}
	}
	return msg
}

// Representative bad bodies of every route taking one: the answer is a
// 4xx envelope a client can read, naming JSON fields.
func TestAPI_badBodiesOfEveryCreateRouteGetClientMessages(t *testing.T) {
	srv := binaryAPI(t)
	doc := srv.OpenAPI()
	var routes int
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.RequestBody == nil {
				continue
			}
			routes++
			fiberPath := concrete(regexp.MustCompile(`\{[^}]+\}`).ReplaceAllString(path, ":p"))
			bodies := []string{`[]`, `"text"`, `{"no_such_field_x":1}`, `{"a":`, `{}{}`}
			// Each property given a value of the wrong kind.
			for prop, kind := range bodyProperties(doc, op.RequestBody.Value) {
				wrong := `"text"`
				if kind == "string" {
					wrong = `123`
				}
				bodies = append(bodies, `{"`+prop+`":`+wrong+`}`)
			}
			for _, body := range bodies {
				what := strings.ToUpper(method) + " " + path + " " + body
				status, resp := call(t, srv, strings.ToUpper(method), fiberPath, body)
				msg := checkMessage(t, what, status, resp)
				if prop, _, ok := strings.Cut(strings.TrimPrefix(body, `{"`), `":`); ok && strings.HasPrefix(body, `{"`) &&
					prop != "no_such_field_x" && msg != "" && status == http.StatusBadRequest && !strings.Contains(msg, prop) {
					t.Errorf("%s: message %q does not name the field %q", what, msg, prop)
				}
			}
		}
	}
	if routes < 10 {
		t.Fatalf("found %d routes with a body, want every flow's", routes)
	}
}

// bodyProperties returns the top-level properties of a request body's
// schema and their JSON types.
func bodyProperties(doc *openapi3.T, requestBody *openapi3.RequestBody) map[string]string {
	schema := requestBody.Content.Get("application/json").Schema
	if schema.Ref != "" {
		schema = doc.Components.Schemas[strings.TrimPrefix(schema.Ref, "#/components/schemas/")]
	}
	out := map[string]string{}
	for name, p := range schema.Value.Properties {
		if p.Value == nil {
			continue // a component's reference
		}
		if typ := p.Value.Type.Slice(); len(typ) == 1 && typ[0] != "object" {
			out[name] = typ[0]
		}
	}
	return out
}

// Identifiers and names with control or bidirectional formatting
// characters are refused with 422 invalid_text, naming the field.
func TestAPI_controlAndBidiCharactersRefusedInIdentifiers(t *testing.T) {
	srv := binaryAPI(t)
	tests := []struct {
		path, body, field string
	}{
		{"/v1/watchers", `{"name":"evil\u202Etxt","channel":"log"}`, "name"},
		{"/v1/watchers", `{"name":"w","provider":"simulator","venue":"v\u20661","channel":"log"}`, "venue"},
		{"/v1/watchers", `{"name":"w","provider":"sim\u0007","channel":"log"}`, "provider"},
		{"/v1/sources", `{"id":"s\u200F1","provider":"simulator","base_url":"http://127.0.0.1:1","scopes":[{"venue":"1","date":"2026-12-01","party_size":2}]}`, "id"},
		{"/v1/sources", `{"id":"s1","provider":"simulator","base_url":"http://127.0.0.1:1","scopes":[{"venue":"1\u202A","date":"2026-12-01","party_size":2}]}`, "scopes.venue"},
		{"/v1/subscribers", `{"name":"a\u202Db","destinations":[{"kind":"log","address":"x"}]}`, "name"},
		{"/v1/feeds", `{"id":"f\u200E1","url":"http://127.0.0.1:1/feed.xml"}`, "id"},
		{"/v1/feeds/x1/subscribables", `{"name":"n\u2067","manager":{"kind":"all"}}`, "name"},
		{"/v1/offers", `{"offerId":"o\u001b1","handler":"h","productId":"p","sellerId":"s","quantity":1}`, "offerId"},
	}
	for _, tt := range tests {
		t.Run(tt.path+" "+tt.field, func(t *testing.T) {
			status, body := call(t, srv, http.MethodPost, tt.path, tt.body)
			msg := checkMessage(t, tt.path, status, body)
			if status != http.StatusUnprocessableEntity || !strings.Contains(string(body), api.CodeInvalidText) ||
				!strings.HasPrefix(msg, tt.field+" ") {
				t.Errorf("POST %s %s = %d %s, want 422 %s naming %s", tt.path, tt.body, status, body, api.CodeInvalidText, tt.field)
			}
		})
	}
}

// A date that is no calendar date is a 400, not an empty page.
func TestAPI_availabilityDateMustBeACalendarDate(t *testing.T) {
	srv := binaryAPI(t)
	for _, date := range []string{"2026-13-45", "2026-02-30", "tomorrow"} {
		status, body := call(t, srv, http.MethodGet, "/v1/availability?date="+date, "")
		checkMessage(t, date, status, body)
		if status != http.StatusBadRequest || !strings.Contains(string(body), "invalid_date") {
			t.Errorf("GET /v1/availability?date=%s = %d %s, want 400 invalid_date", date, status, body)
		}
	}
	if status, body := call(t, srv, http.MethodGet, "/v1/availability?date=2026-12-01", ""); status != http.StatusOK {
		t.Errorf("a real date = %d %s, want 200", status, body)
	}
}

// The limits set by --api-limits reach the API: a caller's requests of a
// class beyond its burst are refused with 429 and a Retry-After, while
// its requests of other classes still pass.
func TestAPI_limitsFromTheConfiguration(t *testing.T) {
	srv := binaryAPIWith(t, func(c *Config) { c.APILimits = "create=0.01/2" })
	body := `{"venue":"v1","provider":"resy","date":"2030-01-02","party_size":2,"webhook_url":"https://example.org/hook"}`
	var codes []int
	for range 3 {
		code, _ := call(t, srv, http.MethodPost, "/v1/watchers", body)
		codes = append(codes, code)
	}
	if codes[0] == http.StatusTooManyRequests || codes[1] == http.StatusTooManyRequests || codes[2] != http.StatusTooManyRequests {
		t.Errorf("statuses of three creates %v, want the third alone refused with 429", codes)
	}
	if code, _ := call(t, srv, http.MethodGet, "/v1/watchers", ""); code != http.StatusOK {
		t.Errorf("read after the create limit: %d, want 200", code)
	}
	if code, body := call(t, srv, http.MethodPost, "/payment/create_user", ""); code != http.StatusOK {
		t.Errorf("contract write after the create limit: %d %s, want 200", code, body)
	}
}

// Every operation of the binary names its rate-limit class: one without
// would be limited as a create, whatever it does.
func TestAPI_everyOperationNamesItsRateClass(t *testing.T) {
	srv := binaryAPI(t)
	ops := srv.Operations()
	if len(ops) < 50 {
		t.Fatalf("%d operations registered, want every flow's", len(ops))
	}
	for _, op := range ops {
		if op.Class == api.ClassUnset {
			t.Errorf("%s %s names no rate-limit class (api.Operation.Class)", op.Method, op.Path)
		}
		if op.Public && op.Class != api.ClassPublic {
			t.Errorf("%s %s needs no key but is in class %s, want public", op.Method, op.Path, op.Class)
		}
	}
}
