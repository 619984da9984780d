package flowhttp

import (
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
