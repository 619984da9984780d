package api

import (
	"cmp"
	"net/http"
	"regexp"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
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
	// doc is the document of ops, made on demand; Handle clears it.
	doc *openapi3.T
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
	s.spec.doc = nil
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
// every route registered with Handle. It is made once for a set of routes
// and shared: callers must not change it.
func (s *Server) OpenAPI() *openapi3.T {
	s.spec.mu.Lock()
	defer s.spec.mu.Unlock()
	if s.spec.doc == nil {
		s.spec.doc = s.document(s.spec.ops)
	}
	return s.spec.doc
}

// document makes the OpenAPI document of ops.
func (s *Server) document(ops []Operation) *openapi3.T {
	values := []any{envelope{}, healthBody{}, readyBody{}}
	for _, op := range ops {
		values = append(values, op.Body, op.Response)
	}
	schemas := newSchemaSet(values...)
	errJSON := openapi3.NewContentWithJSONSchemaRef(schemas.of(envelope{}))
	doc := &openapi3.T{OpenAPI: "3.0.3", Info: &openapi3.Info{Title: "dropstream API", Version: "1"}, Paths: openapi3.NewPaths(),
		Components: &openapi3.Components{Schemas: schemas.components, SecuritySchemes: openapi3.SecuritySchemes{
			"bearer": {Value: openapi3.NewSecurityScheme().WithType("http").WithScheme("bearer")},
			"apiKey": {Value: openapi3.NewSecurityScheme().WithType("apiKey").WithIn("header").WithName(HeaderAPIKey)},
		}}}
	response := func(description string, content openapi3.Content) *openapi3.ResponseRef {
		return &openapi3.ResponseRef{Value: openapi3.NewResponse().WithDescription(description).WithContent(content)}
	}
	operational := func(path, summary string, responses ...openapi3.NewResponsesOption) {
		doc.AddOperation(path, http.MethodGet, &openapi3.Operation{Summary: summary, Tags: []string{"operations"},
			Security: &openapi3.SecurityRequirements{}, Responses: openapi3.NewResponses(responses...)})
	}
	ready := openapi3.NewContentWithJSONSchemaRef(schemas.of(readyBody{}))
	operational(PathHealthz, "Liveness", openapi3.WithStatus(200, response("Alive", openapi3.NewContentWithJSONSchemaRef(schemas.of(healthBody{})))))
	operational(PathReadyz, "Readiness of Redis (and ClickHouse when configured)",
		openapi3.WithStatus(200, response("Ready", ready)), openapi3.WithStatus(503, response("A check failed", ready)))
	if s.cfg.MetricsHandler != nil {
		operational(PathMetrics, "Prometheus metrics", openapi3.WithStatus(200, response("Metrics in the Prometheus text format",
			openapi3.NewContentWithSchema(openapi3.NewStringSchema(), []string{"text/plain"}))))
	}
	operational(PathOpenAPI, "This document", openapi3.WithStatus(200, response("The OpenAPI 3 document",
		openapi3.NewContentWithJSONSchema(openapi3.NewObjectSchema()))))
	for _, op := range ops {
		o := &openapi3.Operation{Summary: op.Summary, Responses: openapi3.NewResponses(),
			Security:   &openapi3.SecurityRequirements{{"bearer": {op.Scope.String()}}, {"apiKey": {op.Scope.String()}}},
			Extensions: map[string]any{"x-rate-class": op.Class.effective().String()}}
		if op.Public {
			o.Security = &openapi3.SecurityRequirements{}
		}
		if op.Tag != "" {
			o.Tags = []string{op.Tag}
		}
		for _, m := range pathParam.FindAllStringSubmatch(op.Path, -1) {
			o.AddParameter(openapi3.NewPathParameter(m[1]).WithSchema(openapi3.NewStringSchema()))
		}
		for _, q := range op.Query {
			// An empty optional parameter ("?limit=") is as if absent.
			o.AddParameter(&openapi3.Parameter{Name: q.Name, In: openapi3.ParameterInQuery, Description: q.Description, Required: q.Required,
				AllowEmptyValue: !q.Required, Schema: openapi3.NewSchemaRef("", &openapi3.Schema{Type: &openapi3.Types{cmp.Or(q.Type, "string")}})})
		}
		var content openapi3.Content
		if sch := schemas.of(op.Response); sch != nil || op.ContentType != "" {
			content = openapi3.NewContentWithSchemaRef(cmp.Or(sch, openapi3.NewStringSchema().NewRef()), []string{cmp.Or(op.ContentType, "application/json")})
		}
		for _, st := range append([]int{op.Status}, op.OtherStatuses...) {
			o.AddResponse(st, openapi3.NewResponse().WithDescription(http.StatusText(st)).WithContent(content))
		}
		errContent := errJSON
		if op.ContentType != "" && op.ContentType != "application/json" {
			// A page people open answers its errors as a page too.
			errContent = openapi3.Content{"application/json": errJSON.Get("application/json"),
				op.ContentType: openapi3.NewMediaType().WithSchema(openapi3.NewStringSchema())}
		}
		errResponse := response("Error: the JSON error envelope", errContent)
		o.Responses.Set("4XX", errResponse)
		o.Responses.Set("5XX", errResponse)
		if sch := schemas.of(op.Body); sch != nil {
			o.RequestBody = &openapi3.RequestBodyRef{Value: openapi3.NewRequestBody().WithRequired(true).WithJSONSchemaRef(sch)}
		}
		doc.AddOperation(pathParam.ReplaceAllString(op.Path, "{$1}"), op.Method, o)
	}
	return doc
}
