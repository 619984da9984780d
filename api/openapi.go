package api

import (
	"cmp"
	"maps"
	"net/http"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/gofiber/fiber/v2"
)

// PathOpenAPI serves the OpenAPI 3 document of every route.
const PathOpenAPI = "/openapi.json"

// Param documents a path or query parameter.
type Param struct {
	Name string
	// In is "path" or "query"; path parameters are found from the route.
	In          string
	Description string
	// Type is the schema type: "string" (default), "integer" or "boolean".
	Type     string
	Required bool
}

// Operation is a documented route. Register it with Server.Handle so the
// route and its entry in /openapi.json cannot drift apart.
type Operation struct {
	// Method and Path as Fiber takes them ("/v1/things/:id").
	Method string
	Path   string
	// Summary and Tag group the operation in the document.
	Summary string
	Tag     string
	// Scope is the API key scope the route requires.
	Scope Scope
	// Public routes need no API key (links people follow from messages);
	// Scope is ignored.
	Public bool
	// Class is what the route does, for its rate limit (see [Class] and
	// [RateLimitConfig]). Every operation names one; one that does not is
	// limited as ClassCreate, the strictest.
	Class Class
	// ContentType is the success response's media type. Default
	// application/json. The response is a string of that type, unless
	// Response gives its shape.
	ContentType string
	// Query documents query parameters.
	Query []Param
	// Body is a value of the request body's type, or nil.
	Body any
	// Response is a value of the success response's type, or nil.
	Response any
	// Status is the success status. Default 200.
	Status int
	// OtherStatuses are further success statuses answered with the same
	// body (200 when a create finds the thing already there, 202 when an
	// answer is not complete yet).
	OtherStatuses []int
	Handler       fiber.Handler
}

// openAPI accumulates documented operations.
type openAPI struct {
	mu  sync.Mutex
	ops []Operation
}

// Handle registers op's route under its scope and documents it. A GET
// route also answers HEAD (the same handler; the server sends no body).
func (s *Server) Handle(op Operation) {
	op.Status = cmp.Or(op.Status, http.StatusOK)
	// The class of an operation that names none is the strictest, not
	// that of its method.
	class := op.Class.effective()
	handlers := []fiber.Handler{s.limitAs(class), op.Handler}
	if !op.Public {
		handlers[0] = s.requireScope(op.Scope, class)
	}
	s.app.Add(op.Method, op.Path, handlers...)
	if op.Method == http.MethodGet {
		s.app.Add(http.MethodHead, op.Path, handlers...)
	}
	s.spec.mu.Lock()
	s.spec.ops = append(s.spec.ops, op)
	s.spec.mu.Unlock()
}

// Operations returns the operations registered with Handle, in order.
func (s *Server) Operations() []Operation {
	s.spec.mu.Lock()
	defer s.spec.mu.Unlock()
	return append([]Operation(nil), s.spec.ops...)
}

var pathParam = regexp.MustCompile(`:([A-Za-z0-9_]+)`)

// OpenAPI returns the OpenAPI 3.0 document of the operational routes and
// every route registered with Handle.
func (s *Server) OpenAPI() map[string]any {
	ops := s.Operations()
	values := []any{envelope{}, healthBody{}, readyBody{}}
	for _, op := range ops {
		values = append(values, op.Body, op.Response)
	}
	schemas := newSchemaSet(values...)
	schemas.names[reflect.TypeOf(envelope{})] = "Error"
	errRef := schemas.of(envelope{})
	errResponse := map[string]any{"description": "Error: the JSON error envelope", "content": map[string]any{"application/json": map[string]any{"schema": errRef}}}
	paths := map[string]any{}
	add := func(path, method string, op map[string]any) {
		item, _ := paths[path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[path] = item
		}
		item[method] = op
	}
	operational := func(summary string, responses map[string]any) map[string]any {
		return map[string]any{"summary": summary, "tags": []string{"operations"}, "security": []any{}, "responses": responses}
	}
	content := func(media string, schema map[string]any) map[string]any {
		return map[string]any{media: map[string]any{"schema": schema}}
	}
	ready := schemas.of(readyBody{})
	add(PathHealthz, "get", operational("Liveness", map[string]any{
		"200": map[string]any{"description": "Alive", "content": content("application/json", schemas.of(healthBody{}))}}))
	add(PathReadyz, "get", operational("Readiness of Redis (and ClickHouse when configured)", map[string]any{
		"200": map[string]any{"description": "Ready", "content": content("application/json", ready)},
		"503": map[string]any{"description": "A check failed", "content": content("application/json", ready)}}))
	if s.cfg.MetricsHandler != nil {
		add(PathMetrics, "get", operational("Prometheus metrics", map[string]any{
			"200": map[string]any{"description": "Metrics in the Prometheus text format", "content": content("text/plain", map[string]any{"type": "string"})}}))
	}
	add(PathOpenAPI, "get", operational("This document", map[string]any{
		"200": map[string]any{"description": "The OpenAPI 3 document", "content": content("application/json", map[string]any{"type": "object"})}}))
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Path < ops[j].Path })
	for _, op := range ops {
		path := pathParam.ReplaceAllString(op.Path, "{$1}")
		var params []any
		for _, m := range pathParam.FindAllStringSubmatch(op.Path, -1) {
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		}
		for _, q := range op.Query {
			param := map[string]any{"name": q.Name, "in": "query", "required": q.Required,
				"description": q.Description, "schema": map[string]any{"type": cmp.Or(q.Type, "string")}}
			if !q.Required {
				// An empty optional parameter ("?limit=") is as if absent.
				param["allowEmptyValue"] = true
			}
			params = append(params, param)
		}
		success := map[string]any{"description": http.StatusText(op.Status)}
		if sch := schemas.of(op.Response); sch != nil {
			success["content"] = map[string]any{"application/json": map[string]any{"schema": sch}}
		}
		if op.ContentType != "" {
			sch := schemas.of(op.Response)
			if sch == nil {
				sch = map[string]any{"type": "string"}
			}
			success["content"] = map[string]any{op.ContentType: map[string]any{"schema": sch}}
		}
		opErr := errResponse
		if op.ContentType != "" && op.ContentType != "application/json" {
			// A page people open answers its errors as a page too.
			opErr = map[string]any{"description": errResponse["description"], "content": map[string]any{
				"application/json": map[string]any{"schema": errRef},
				op.ContentType:     map[string]any{"schema": map[string]any{"type": "string"}},
			}}
		}
		responses := map[string]any{strconv.Itoa(op.Status): success, "4XX": opErr, "5XX": opErr}
		for _, st := range op.OtherStatuses {
			other := maps.Clone(success)
			other["description"] = http.StatusText(st)
			responses[strconv.Itoa(st)] = other
		}
		o := map[string]any{
			"summary":   op.Summary,
			"responses": responses,
			"security":  []any{map[string]any{"bearer": []string{op.Scope.String()}}, map[string]any{"apiKey": []string{op.Scope.String()}}},
		}
		if op.Public {
			o["security"] = []any{}
		}
		o["x-rate-class"] = op.Class.effective().String()
		if op.Tag != "" {
			o["tags"] = []string{op.Tag}
		}
		if len(params) > 0 {
			o["parameters"] = params
		}
		if sch := schemas.of(op.Body); sch != nil {
			o["requestBody"] = map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{"schema": sch}}}
		}
		add(path, strings.ToLower(op.Method), o)
	}
	return map[string]any{
		"openapi": "3.0.3",
		"info":    map[string]any{"title": "dropstream API", "version": "1"},
		"paths":   paths,
		"components": map[string]any{
			"schemas": schemas.components,
			"securitySchemes": map[string]any{
				"bearer": map[string]any{"type": "http", "scheme": "bearer"},
				"apiKey": map[string]any{"type": "apiKey", "in": "header", "name": HeaderAPIKey},
			},
		},
	}
}
