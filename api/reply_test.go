package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gofiber/fiber/v2"
)

func TestCreated_statusFollowsCreated(t *testing.T) {
	for _, tc := range []struct {
		created bool
		want    int
	}{{true, http.StatusCreated}, {false, http.StatusOK}} {
		app := fiber.New()
		app.Post("/", func(c *fiber.Ctx) error { return Created(c, tc.created, map[string]int{"n": 1}) })
		resp, err := app.Test(httptest.NewRequest(http.MethodPost, "/", nil))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != tc.want || string(body) != `{"n":1}` {
			t.Errorf("created %v: %d %s, want %d {\"n\":1}", tc.created, resp.StatusCode, body, tc.want)
		}
	}
}

func TestDeleted_withoutQuotaAnswersNoContent(t *testing.T) {
	app := fiber.New()
	app.Delete("/:id", func(c *fiber.Ctx) error { return Deleted(c, nil, c.Params("id")) })
	resp, err := app.Test(httptest.NewRequest(http.MethodDelete, "/x", nil))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("status %d, want 204", resp.StatusCode)
	}
}

func TestMapError_firstCaseWrappedAnswers(t *testing.T) {
	errGone, errTaken := errors.New("gone"), errors.New("taken")
	cases := []Case{When(errGone, NotFound("thing_not_found", "no thing x")), When(errTaken, Conflict("thing_taken", ""))}
	other := errors.New("disk on fire")
	for _, tc := range []struct {
		err  error
		want *Error // nil: err itself
	}{
		{fmt.Errorf("lookup: %w", errGone), NotFound("thing_not_found", "no thing x")},
		{fmt.Errorf("put: %w", errTaken), Conflict("thing_taken", "put: taken")},
		{fmt.Errorf("%w and %w", errTaken, errGone), NotFound("thing_not_found", "no thing x")},
		{other, nil},
		{nil, nil},
	} {
		got := MapError(tc.err, cases...)
		if tc.want == nil {
			if got != tc.err {
				t.Errorf("MapError(%v) = %v, want the error itself", tc.err, got)
			}
			continue
		}
		var e *Error
		if !errors.As(got, &e) || *e != *tc.want {
			t.Errorf("MapError(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	if e := cases[1].as; e.Message != "" {
		t.Errorf("MapError changed its case's *Error: %+v", e)
	}
}

func TestReply_answersValueOrMappedError(t *testing.T) {
	errGone := errors.New("gone")
	s, _ := newTestServer(t, Config{})
	g := s.Group("/v1", ScopeRead)
	g.Get("/things/:id", func(c *fiber.Ctx) error {
		var err error
		if c.Params("id") != "a" {
			err = fmt.Errorf("get %s: %w", c.Params("id"), errGone)
		}
		return Reply(c, map[string]string{"id": c.Params("id")}, err, When(errGone, NotFound("thing_not_found", "")))
	})
	g.Delete("/things/:id", func(c *fiber.Ctx) error {
		var err error
		if c.Params("id") != "a" {
			err = errGone
		}
		return NoContent(c, err, When(errGone, NotFound("thing_not_found", "no thing "+c.Params("id"))))
	})
	if r := get(t, s, "/v1/things/a"); r.status != http.StatusOK || string(r.body) != `{"id":"a"}` {
		t.Errorf("GET a: %d %s", r.status, r.body)
	}
	if e := wantEnvelope(t, get(t, s, "/v1/things/b"), http.StatusNotFound, "thing_not_found"); e.Message != "get b: gone" {
		t.Errorf("message %q, want the error's text", e.Message)
	}
	del := func(id string) response {
		req, _ := http.NewRequest(http.MethodDelete, "/v1/things/"+id, nil)
		return do(t, s, req)
	}
	if r := del("a"); r.status != http.StatusNoContent || len(r.body) != 0 {
		t.Errorf("DELETE a: %d %s", r.status, r.body)
	}
	wantEnvelope(t, del("b"), http.StatusNotFound, "thing_not_found")
}

func TestListAll_checksThePageQueryFirst(t *testing.T) {
	s, _ := newTestServer(t, Config{})
	calls := 0
	s.Group("/v1", ScopeRead).Get("/things", func(c *fiber.Ctx) error {
		return ListAll(c, func(s string) string { return s }, func() ([]string, error) {
			calls++
			return []string{"c", "a", "b"}, nil
		})
	})
	wantEnvelope(t, get(t, s, "/v1/things?limit=0"), http.StatusBadRequest, "invalid_limit")
	if calls != 0 {
		t.Errorf("the list was read %d times for a bad query", calls)
	}
	if r := get(t, s, "/v1/things?limit=2&cursor=a"); string(r.body) != `{"items":["b","c"]}` {
		t.Errorf("page after a: %d %s", r.status, r.body)
	}
}
