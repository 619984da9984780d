package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/dropstream/dropstream/api"
)

func init() {
	// Pages people follow from messages answer HTML; streams are text.
	openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.FileBodyDecoder)
	openapi3filter.RegisterBodyDecoder("text/javascript", openapi3filter.FileBodyDecoder)
	openapi3filter.RegisterBodyDecoder("text/css", openapi3filter.FileBodyDecoder)
	openapi3filter.RegisterBodyDecoder("text/event-stream", openapi3filter.FileBodyDecoder)
	openapi3filter.RegisterBodyDecoder("application/schema+json", openapi3filter.JSONBodyDecoder)
}

// Contract is a server's OpenAPI document, loaded and validated, with the
// router that finds a request's documented operation.
type Contract struct {
	Doc    *openapi3.T
	router routers.Router
}

// contracts caches the contract of each document a server made; a server
// makes a new one when routes were added since.
var contracts sync.Map // *openapi3.T → *Contract

// Document loads s's /openapi.json document and validates it as OpenAPI 3,
// failing the test when it is not valid.
func Document(t testing.TB, s *api.Server) *Contract {
	t.Helper()
	c, err := LoadContract(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// LoadContract loads s's document, validates it as OpenAPI 3 and builds its
// router.
func LoadContract(s *api.Server) (*Contract, error) {
	doc := s.OpenAPI()
	if c, ok := contracts.Load(doc); ok {
		return c.(*Contract), nil
	}
	data, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("openapi: encode the document: %w", err)
	}
	c, err := ParseContract(data)
	if err != nil {
		return nil, err
	}
	contracts.Store(doc, c)
	return c, nil
}

// ParseContract loads a document (the body of /openapi.json), validates it
// as OpenAPI 3 and builds its router.
func ParseContract(data []byte) (*Contract, error) {
	doc, err := openapi3.NewLoader().LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("openapi: load the document: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("openapi: the document is not valid OpenAPI 3: %w", err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("openapi: route the document: %w", err)
	}
	return &Contract{Doc: doc, router: router}, nil
}

// Operations counts the document's operations.
func (c *Contract) Operations() int {
	n := 0
	for _, item := range c.Doc.Paths.Map() {
		n += len(item.Operations())
	}
	return n
}

// Check validates one exchange against the document and returns what does
// not match, or nil:
//
//   - a request the document refuses (wrong type, missing required field
//     or parameter) must be refused by the server with a 4xx;
//   - every response, success or error, must match the documented
//     response of its status (an undocumented status is a mismatch);
//   - a request to no documented operation must not succeed (HEAD, which
//     every GET route answers, excepted).
//
// API keys are not checked: the server's own answer (401, 403) is
// validated as any other response.
func (c *Contract) Check(ctx context.Context, req *http.Request, reqBody []byte, res Response) error {
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		if req.Method != http.MethodHead && res.Status < 400 {
			return fmt.Errorf("%s %s answered %d but is no documented operation (%v)", req.Method, req.URL.Path, res.Status, err)
		}
		return nil
	}
	opts := &openapi3filter.Options{
		AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
		IncludeResponseStatus: true,
		MultiError:            true,
		// A server ignores the server-set fields a client sends back.
		ExcludeReadOnlyValidations: true,
		SchemaValidationOptions:    []openapi3.SchemaValidationOption{openapi3.DisableSchemaErrorDetails()},
	}
	in := &openapi3filter.RequestValidationInput{Request: cloneWithBody(req, reqBody), PathParams: params, Route: route, Options: opts}
	var errs []error
	if err := openapi3filter.ValidateRequest(ctx, in); err != nil && res.Status < 400 {
		errs = append(errs, fmt.Errorf("the document refuses the request, the server answered %d: %w", res.Status, err))
	}
	in.Request = cloneWithBody(req, reqBody)
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: res.Status, Header: res.Header, Options: opts}
	out.SetBodyBytes(res.Body)
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		errs = append(errs, fmt.Errorf("the response does not match the document: %w", err))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%s %s (body %.300s) → %d %.300s: %w", req.Method, req.URL.RequestURI(), reqBody, res.Status, res.Body, errors.Join(errs...))
}

// cloneWithBody returns req with a fresh reader of body.
func cloneWithBody(req *http.Request, body []byte) *http.Request {
	r := req.Clone(context.Background())
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	return r
}
