package feed

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/flows/feed/feedsim"
)

// call sends a request to srv and decodes the JSON answer into out.
func call(t *testing.T, srv *api.Server, method, path string, body any, out any) int {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req := httptest.NewRequest(method, path, r)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := srv.App().Test(req, 10_000)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, raw, err)
		}
	}
	return resp.StatusCode
}

func newAPI(t *testing.T, f *Flow) *api.Server {
	t.Helper()
	srv, err := api.New(api.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	f.Register(srv)
	return srv
}

func TestRoutes_feedsCRUDAndValidation(t *testing.T) {
	b := backends()[0]
	h := newHarness(t, b, feedsim.New(feedsim.RSS), Feed{})
	srv := newAPI(t, h.flow)
	in := Feed{URL: "https://example.org/feed.xml", MinDelayMinutes: 5, AwaitStabilizationMinutes: 15, MaxDelayMinutes: 60, PollEvery: "10m"}
	var created Feed
	if code := call(t, srv, "POST", "/v1/feeds", in, &created); code != http.StatusCreated || created.ID != FeedID(in.URL) {
		t.Fatalf("POST /v1/feeds: %d %+v", code, created)
	}
	if code := call(t, srv, "POST", "/v1/feeds", in, nil); code != http.StatusOK {
		t.Errorf("POST the same feed again: %d, want 200", code)
	}
	other := in
	other.MaxDelayMinutes = 90
	if code := call(t, srv, "POST", "/v1/feeds", other, nil); code != http.StatusConflict {
		t.Errorf("POST the URL with other settings: %d, want 409", code)
	}
	bad := []Feed{
		{URL: "ftp://example.org/x"},
		{URL: "https://example.org/x", MinDelayMinutes: 10, MaxDelayMinutes: 5},
		{URL: "https://example.org/x", PollEvery: "1ms"},
		{URL: "https://example.org/" + strings.Repeat("x", MaxURLBytes)},
		{URL: "https://example.org/x", AwaitStabilizationMinutes: -1},
	}
	for _, fd := range bad {
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		if code := call(t, srv, "POST", "/v1/feeds", fd, &e); code != http.StatusUnprocessableEntity || e.Error.Code != "invalid_feed" {
			t.Errorf("POST %+v: %d %q, want 422 invalid_feed", fd, code, e.Error.Code)
		}
	}
	var page feedPage
	if code := call(t, srv, "GET", "/v1/feeds", nil, &page); code != http.StatusOK || len(page.Items) != 2 {
		t.Fatalf("GET /v1/feeds: %d, %d feeds, want 2", code, len(page.Items))
	}
	if code := call(t, srv, "POST", "/v1/feeds/"+created.ID+"/subscribables", Subscribable{Name: "w", Manager: Manager{Kind: Weekly, Weekday: "caturday"}}, nil); code != http.StatusUnprocessableEntity {
		t.Errorf("bad weekly manager: %d, want 422", code)
	}
	if code := call(t, srv, "POST", "/v1/feeds/"+created.ID+"/subscribables", Subscribable{Name: "d", Manager: Manager{Kind: Daily, Hour: 7, TimeZone: "Europe/Paris"}}, nil); code != http.StatusCreated {
		t.Fatalf("daily manager: %d", code)
	}
	if code := call(t, srv, "DELETE", "/v1/feeds/"+created.ID, nil, nil); code != http.StatusConflict {
		t.Errorf("DELETE a feed with subscribables: %d, want 409", code)
	}
	if code := call(t, srv, "DELETE", "/v1/feeds/"+created.ID+"/subscribables/d", nil, nil); code != http.StatusNoContent {
		t.Errorf("DELETE subscribable: %d", code)
	}
	if code := call(t, srv, "DELETE", "/v1/feeds/"+created.ID, nil, nil); code != http.StatusNoContent {
		t.Errorf("DELETE feed: %d", code)
	}
	if code := call(t, srv, "GET", "/v1/feeds/"+created.ID, nil, nil); code != http.StatusNotFound {
		t.Errorf("GET a deleted feed: %d, want 404", code)
	}
	if code := call(t, srv, "GET", "/v1/feeds/"+h.feed.ID+"/items?limit=5000", nil, nil); code != http.StatusBadRequest {
		t.Errorf("GET items with limit 5000: %d, want 400", code)
	}
	var doc map[string]any
	call(t, srv, "GET", api.PathOpenAPI, nil, &doc)
	paths, _ := doc["paths"].(map[string]any)
	for _, p := range []string{"/v1/feeds", "/v1/feeds/{id}", "/v1/feeds/{id}/items", "/v1/feeds/{id}/subscribables/{name}/subscriptions"} {
		if _, ok := paths[p]; !ok {
			t.Errorf("openapi.json lacks %s", p)
		}
	}
}
