package feed

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/flows/feed/feedsim"
	"github.com/dropstream/dropstream/internal/testenv"
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
	b := testenv.Backends()[0]
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
	for i := range MaxSubscribables {
		if _, _, err := h.flow.store.PutSubscribable(h.ctx, Subscribable{FeedID: h.feed.ID, Name: fmt.Sprint("s", i), Manager: Manager{Kind: EachItem}}); err != nil {
			t.Fatal(err)
		}
	}
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	if code := call(t, srv, "POST", "/v1/feeds/"+h.feed.ID+"/subscribables", Subscribable{Name: "one-more", Manager: Manager{Kind: EachItem}}, &e); code != http.StatusConflict || e.Error.Code != "subscribable_conflict" {
		t.Errorf("subscribable %d of a feed: %d %q, want 409 subscribable_conflict", MaxSubscribables+1, code, e.Error.Code)
	}
	if code := call(t, srv, "POST", "/v1/feeds/"+h.feed.ID+"/subscribables", Subscribable{Name: "s0", Manager: Manager{Kind: EachItem}}, nil); code != http.StatusOK {
		t.Errorf("an existing subscribable again at the cap: %d, want 200", code)
	}
	var doc map[string]any
	call(t, srv, "GET", api.PathOpenAPI, nil, &doc)
	paths, _ := doc["paths"].(map[string]any)
	for _, p := range []string{"/v1/feeds", "/v1/feeds/{id}", "/v1/feeds/{id}/items", "/v1/feeds/{id}/items/{iid}/exclude", "/v1/feeds/{id}/subscribables",
		"/v1/feeds/{id}/subscribables/{name}", "/v1/feeds/{id}/subscribables/{name}/collections", "/v1/feeds/{id}/subscribables/{name}/subscriptions",
		"/v1/feed-subscriptions/{sid}"} {
		if _, ok := paths[p]; !ok {
			t.Errorf("openapi.json lacks %s", p)
		}
	}
}

// The items API shows each item's state, timestamps (a 304 answer checks
// the items of the last document again, not one that vanished) and (until
// it is cleared) content; an excluded item is never sent, even when it
// reappears, and only an unassigned item can be excluded.
func TestRoutes_itemsAndExclusion(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			sim := feedsim.New(feedsim.RSS, item("a", "A"), item("b", "B"))
			h := newHarness(t, b, sim, Feed{AwaitStabilizationMinutes: 10, MaxDelayMinutes: 60, IncludeExisting: true})
			srv := newAPI(t, h.flow)
			h.subscribe("each", Manager{Kind: EachItem})
			h.pollAt(t0)
			sim.Set(item("a", "A edited")) // b vanishes
			h.pollAt(t0.Add(5 * time.Minute))
			if p := h.pollAt(t0.Add(6 * time.Minute)); !p.NotModified { // a is checked again
				t.Fatalf("poll %+v, want 304 not modified", p)
			}

			base := "/v1/feeds/" + h.feed.ID + "/items"
			var page itemPage
			if code := call(t, srv, "GET", base, nil, &page); code != http.StatusOK || len(page.Items) != 2 {
				t.Fatalf("GET items: %d %+v", code, page.Items)
			}
			a, bi := page.Items[0], page.Items[1]
			at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
			if a.GUID != "a" || a.State != StateUnassigned || !a.FirstSeen.Equal(at(0)) || !a.LastChecked.Equal(at(6)) || !a.StableSince.Equal(at(5)) ||
				a.Content == nil || a.Content.Title != "A edited" || a.Hash != a.Content.Hash || a.IID != IID("a") {
				t.Errorf("edited item %+v", a)
			}
			if bi.GUID != "b" || bi.State != StateUnassigned || !bi.FirstSeen.Equal(at(0)) || !bi.LastChecked.Equal(at(0)) || !bi.StableSince.Equal(at(0)) {
				t.Errorf("vanished item %+v, want it last checked when last seen", bi)
			}
			var one itemPage
			if code := call(t, srv, "GET", base+"?offset=1&limit=1", nil, &one); code != http.StatusOK || len(one.Items) != 1 || one.Items[0].GUID != "b" {
				t.Errorf("GET items from offset 1: %d %+v", code, one.Items)
			}

			for i := range 2 { // excluding twice is the same
				var out ItemView
				if code := call(t, srv, "POST", base+"/"+IID("b")+"/exclude", nil, &out); code != http.StatusOK || out.State != StateExcluded {
					t.Fatalf("exclude b (%d): %d %+v", i, code, out)
				}
			}
			h.pollAt(at(15))
			sim.Set(item("a", "A edited"), item("b", "B"))
			h.pollAt(at(80))
			if got, want := h.delivered(), map[string][][]string{"each": {{"a"}}}; !reflect.DeepEqual(got, want) {
				t.Fatalf("delivered %v, want %v", got, want)
			}
			var e struct {
				Error struct{ Code string } `json:"error"`
			}
			if code := call(t, srv, "POST", base+"/"+IID("a")+"/exclude", nil, &e); code != http.StatusConflict || e.Error.Code != "item_not_unassigned" {
				t.Errorf("exclude a cleared item: %d %q, want 409 item_not_unassigned", code, e.Error.Code)
			}
			for _, iid := range []string{IID("nope"), "not-hex"} {
				if code := call(t, srv, "POST", base+"/"+iid+"/exclude", nil, nil); code != http.StatusNotFound {
					t.Errorf("exclude %s: %d, want 404", iid, code)
				}
			}
			var after itemPage
			call(t, srv, "GET", base, nil, &after)
			states := map[string]string{}
			for _, it := range after.Items {
				states[it.GUID] = it.State
				if it.Content != nil {
					t.Errorf("item %s (%s) keeps its content", it.GUID, it.State)
				}
			}
			if want := map[string]string{"a": StateCleared, "b": StateExcluded}; !reflect.DeepEqual(states, want) {
				t.Errorf("states %v, want %v", states, want)
			}
		})
	}
}
