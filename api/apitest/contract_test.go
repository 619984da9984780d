package apitest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"

	"github.com/dropstream/dropstream/api"
)

type gadget struct {
	ID   string `json:"id" openapi:"readonly"`
	Name string `json:"name"`
}

// TestContract_checksRequestsAndAnswers runs exchanges through a server
// whose handlers drift from their documentation and checks which ones
// the contract refuses.
func TestContract_checksRequestsAndAnswers(t *testing.T) {
	srv, _ := NewServer(t, api.Config{})
	srv.Handle(api.Operation{Method: "POST", Path: "/v1/gadgets", Scope: api.ScopeWrite, Body: gadget{}, Response: gadget{},
		Status: http.StatusCreated, Handler: func(c *fiber.Ctx) error {
			switch c.Query("mode") {
			case "ok-status":
				return c.JSON(gadget{ID: "g1", Name: "a"}) // 200, documented 201
			case "no-name":
				return c.Status(http.StatusCreated).JSON(map[string]string{"id": "g1"})
			case "plain-error":
				return c.Status(http.StatusBadRequest).SendString("bad")
			}
			return c.Status(http.StatusCreated).JSON(gadget{ID: "g1", Name: "a"})
		}})
	contract := Document(t, srv)
	for _, tc := range []struct {
		query, body, wantErr string
	}{
		{"", `{"name":"a"}`, ""},
		{"", `{"name":"a","id":"mine"}`, ""}, // a server-set field sent back is ignored
		{"", `{}`, "the document refuses the request"},
		{"", `{"name":1}`, "the document refuses the request"},
		{"mode=ok-status", `{"name":"a"}`, "status is not supported"},
		{"mode=no-name", `{"name":"a"}`, "response body doesn't match"},
		{"mode=plain-error", `{"name":"a"}`, "Content-Type"},
	} {
		req := httptest.NewRequest(http.MethodPost, "/v1/gadgets?"+tc.query, strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		res, err := srv.App().Test(req, -1)
		if err != nil {
			t.Fatal(err)
		}
		body := make([]byte, 4096)
		n, _ := res.Body.Read(body)
		err = contract.Check(context.Background(), req, []byte(tc.body), Response{Status: res.StatusCode, Header: res.Header, Body: body[:n]})
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s %s: %v", tc.query, tc.body, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s %s: error %v, want %q", tc.query, tc.body, err, tc.wantErr)
		}
	}
	// A route answering outside the document is a mismatch, a 404 is not.
	srv.App().Get("/v1/hidden", func(c *fiber.Ctx) error { return c.SendString("x") })
	for path, wantErr := range map[string]bool{"/v1/hidden": true, "/v1/nothing": false} {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		res, err := srv.App().Test(req, -1)
		if err != nil {
			t.Fatal(err)
		}
		if err := contract.Check(context.Background(), req, nil, Response{Status: res.StatusCode, Header: res.Header}); (err != nil) != wantErr {
			t.Errorf("GET %s: %v, want an error: %v", path, err, wantErr)
		}
	}
}
