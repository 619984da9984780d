package httpapi_test

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/api/apitest"
	"github.com/dropstream/dropstream/flows/feed"
	"github.com/dropstream/dropstream/flows/feed/feedsim"
	"github.com/dropstream/dropstream/flows/feed/httpapi"
	"github.com/dropstream/dropstream/internal/testenv"
)

// The pages the list operations answer.
type (
	feedPage         struct{ Items []httpapi.FeedView }
	itemPage         struct{ Items []feed.ItemView }
	subscriptionPage struct{ Items []feed.Subscription }
	collectionPage   struct{ Items []feed.CollectionView }
)

func TestRoutes_feedsCRUDAndValidation(t *testing.T) {
	b := testenv.Backends()[0]
	h := newHarness(t, b, feedsim.New(feedsim.RSS), feed.Feed{})
	srv := newAPI(t, h.flow)
	in := feed.Feed{URL: "https://example.org/feed.xml", MinDelayMinutes: 5, AwaitStabilizationMinutes: 15, MaxDelayMinutes: 60, PollEvery: "10m"}
	var created feed.Feed
	if code := call(t, srv, "POST", "/v1/feeds", in, &created); code != http.StatusCreated || created.ID != feed.FeedID(in.URL) {
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
	bad := []feed.Feed{
		{URL: "ftp://example.org/x"},
		{URL: "https://example.org/x", MinDelayMinutes: 10, MaxDelayMinutes: 5},
		{URL: "https://example.org/x", PollEvery: "1ms"},
		{URL: "https://example.org/" + strings.Repeat("x", feed.MaxURLBytes)},
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
	if code := call(t, srv, "POST", "/v1/feeds/"+created.ID+"/subscribables", feed.Subscribable{Name: "w", Manager: feed.Manager{Kind: feed.Weekly, Weekday: "caturday"}}, nil); code != http.StatusUnprocessableEntity {
		t.Errorf("bad weekly manager: %d, want 422", code)
	}
	if code := call(t, srv, "POST", "/v1/feeds/"+created.ID+"/subscribables", feed.Subscribable{Name: "d", Manager: feed.Manager{Kind: feed.Daily, Hour: 7, TimeZone: "Europe/Paris"}}, nil); code != http.StatusCreated {
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
	for i := range feed.MaxSubscribables {
		if _, _, err := h.flow.Store().PutSubscribable(h.ctx, feed.Subscribable{FeedID: h.feed.ID, Name: fmt.Sprint("s", i), Manager: feed.Manager{Kind: feed.EachItem}}); err != nil {
			t.Fatal(err)
		}
	}
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	if code := call(t, srv, "POST", "/v1/feeds/"+h.feed.ID+"/subscribables", feed.Subscribable{Name: "one-more", Manager: feed.Manager{Kind: feed.EachItem}}, &e); code != http.StatusConflict || e.Error.Code != "subscribable_conflict" {
		t.Errorf("subscribable %d of a feed: %d %q, want 409 subscribable_conflict", feed.MaxSubscribables+1, code, e.Error.Code)
	}
	if code := call(t, srv, "POST", "/v1/feeds/"+h.feed.ID+"/subscribables", feed.Subscribable{Name: "s0", Manager: feed.Manager{Kind: feed.EachItem}}, nil); code != http.StatusOK {
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

// A feed or webhook URL whose host is a denied address is refused with
// 422 and stored nowhere; the test's own feed server (allowed by its
// host:port) is no exception for its other ports.
func TestRoutes_urlsOnDeniedAddressesRefused(t *testing.T) {
	b := testenv.Backends()[0]
	h := newHarness(t, b, feedsim.New(feedsim.RSS), feed.Feed{})
	srv := newAPI(t, h.flow)
	denied := []string{"http://127.0.0.1:1/feed.xml", "http://169.254.169.254/latest/meta-data/", "http://[::ffff:127.0.0.1]/x",
		"http://10.1.2.3/feed.xml", "https://[fd00::1]/feed", "http://100.64.0.1/rss",
		// Checked as stored: trimmed first, then checked.
		" http://127.0.0.1:1/feed.xml", "  http://169.254.169.254/latest/meta-data/ "}
	for _, u := range denied {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if code := call(t, srv, "POST", "/v1/feeds", feed.Feed{URL: u}, &e); code != http.StatusUnprocessableEntity || e.Error.Code != "invalid_feed" ||
			!strings.Contains(e.Error.Message, "denied") {
			t.Errorf("POST feed %q: %d %+v, want 422 invalid_feed saying denied", u, code, e.Error)
		}
	}
	// Credentials in a URL are refused, and never echoed.
	for _, u := range []string{"https://reader:s3cr3t@example.org/feed.xml", " https://reader@example.org/feed.xml"} {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if code := call(t, srv, "POST", "/v1/feeds", feed.Feed{URL: u}, &e); code != http.StatusUnprocessableEntity || e.Error.Code != "invalid_feed" ||
			strings.Contains(e.Error.Message, "s3cr3t") {
			t.Errorf("POST feed %q: %d %+v, want 422 invalid_feed without the password", u, code, e.Error)
		}
	}
	var page feedPage
	if code := call(t, srv, "GET", "/v1/feeds", nil, &page); code != http.StatusOK || len(page.Items) != 1 {
		t.Errorf("GET /v1/feeds: %d, %d feeds, want only the harness's", code, len(page.Items))
	}
	if code := call(t, srv, "POST", "/v1/feeds/"+h.feed.ID+"/subscribables", feed.Subscribable{Name: "each", Manager: feed.Manager{Kind: feed.EachItem}}, nil); code != http.StatusCreated {
		t.Fatalf("subscribable: %d", code)
	}
	for _, u := range denied {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		body := map[string]any{"destination": feed.Destination{Kind: feed.DestWebhook, URL: u}}
		if code := call(t, srv, "POST", "/v1/feeds/"+h.feed.ID+"/subscribables/each/subscriptions", body, &e); code != http.StatusUnprocessableEntity ||
			e.Error.Code != "invalid_subscription" || !strings.Contains(e.Error.Message, "destination.url") {
			t.Errorf("POST webhook subscription %s: %d %+v, want 422 invalid_subscription", u, code, e.Error)
		}
	}
	var subs subscriptionPage
	if code := call(t, srv, "GET", "/v1/feeds/"+h.feed.ID+"/subscribables/each/subscriptions", nil, &subs); code != http.StatusOK || len(subs.Items) != 0 {
		t.Errorf("subscriptions: %d, %d, want none", code, len(subs.Items))
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
			h := newHarness(t, b, sim, feed.Feed{AwaitStabilizationMinutes: 10, MaxDelayMinutes: 60, IncludeExisting: true})
			srv := newAPI(t, h.flow)
			h.subscribe("each", feed.Manager{Kind: feed.EachItem})
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
			if a.GUID != "a" || a.State != feed.StateUnassigned || !a.FirstSeen.Equal(at(0)) || !a.LastChecked.Equal(at(6)) || !a.StableSince.Equal(at(5)) ||
				a.Content == nil || a.Content.Title != "A edited" || a.Hash != a.Content.Hash || a.IID != feed.IID("a") {
				t.Errorf("edited item %+v", a)
			}
			if bi.GUID != "b" || bi.State != feed.StateUnassigned || !bi.FirstSeen.Equal(at(0)) || !bi.LastChecked.Equal(at(0)) || !bi.StableSince.Equal(at(0)) {
				t.Errorf("vanished item %+v, want it last checked when last seen", bi)
			}
			var one itemPage
			if code := call(t, srv, "GET", base+"?offset=1&limit=1", nil, &one); code != http.StatusOK || len(one.Items) != 1 || one.Items[0].GUID != "b" {
				t.Errorf("GET items from offset 1: %d %+v", code, one.Items)
			}

			for i := range 2 { // excluding twice is the same
				var out feed.ItemView
				if code := call(t, srv, "POST", base+"/"+feed.IID("b")+"/exclude", nil, &out); code != http.StatusOK || out.State != feed.StateExcluded {
					t.Fatalf("exclude b (%d): %d %+v", i, code, out)
				}
			}
			h.pollAt(at(15))
			sim.Set(item("a", "A edited"), item("b", "B"))
			h.pollAt(at(80))
			if got, want := h.delivered(), map[string][][]string{"each": {{"a"}}}; !reflect.DeepEqual(got, want) {
				t.Fatalf("delivered %v, want %v", got, want)
			}
			var colls collectionPage
			if code := call(t, srv, "GET", "/v1/feeds/"+h.feed.ID+"/subscribables/each/collections", nil, &colls); code != http.StatusOK || len(colls.Items) != 0 {
				t.Errorf("GET collections of each: %d %+v, want 200 and none (delivered ones are deleted)", code, colls.Items)
			}
			if code := call(t, srv, "GET", "/v1/feeds/"+h.feed.ID+"/subscribables/nope/collections", nil, nil); code != http.StatusNotFound {
				t.Errorf("GET collections of an unknown subscribable: %d, want 404", code)
			}
			var e struct {
				Error struct{ Code string } `json:"error"`
			}
			if code := call(t, srv, "POST", base+"/"+feed.IID("a")+"/exclude", nil, &e); code != http.StatusConflict || e.Error.Code != "item_not_unassigned" {
				t.Errorf("exclude a cleared item: %d %q, want 409 item_not_unassigned", code, e.Error.Code)
			}
			for _, iid := range []string{feed.IID("nope"), "not-hex"} {
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
			if want := map[string]string{"a": feed.StateCleared, "b": feed.StateExcluded}; !reflect.DeepEqual(states, want) {
				t.Errorf("states %v, want %v", states, want)
			}
		})
	}
}

func TestRoutes_feedsAndSubscriptionsCappedPerKey(t *testing.T) {
	h := newHarness(t, testenv.Backends()[0], feedsim.New(feedsim.RSS), feed.Feed{}, func(c *feed.Config) {
		c.MaxFeedsPerCaller, c.MaxSubscriptionsPerCaller = 2, 2
	})
	srv, _ := apitest.NewServer(t, api.Config{APIKeys: "w:write;w2:write"})
	httpapi.Register(srv, h.flow)
	apitest.CheckCap(t, srv, apitest.Cap{Max: 2, Key: "w", OtherKey: "w2",
		Create: func(i int) (string, string, any) {
			return "POST", "/v1/feeds", feed.Feed{URL: fmt.Sprintf("https://example.org/%d.xml", i)}
		},
		ID:     func(t testing.TB, r apitest.Response) string { var f feed.Feed; r.JSON(t, &f); return f.ID },
		Delete: func(id string) string { return "/v1/feeds/" + id },
	})
	// Subscriptions, under keys of their own (w holds its cap of feeds):
	// each tenant holds the shared feed by adding its URL, and defines its
	// own subscribable "each" on it.
	srv, _ = apitest.NewServer(t, api.Config{APIKeys: "s:write;s2:write"})
	httpapi.Register(srv, h.flow)
	for _, key := range []string{"s", "s2"} {
		if r := apitest.Request(t, srv, "POST", "/v1/feeds", feed.Feed{URL: h.feed.URL}, api.HeaderAPIKey, key); r.Status != http.StatusOK && r.Status != http.StatusCreated {
			t.Fatalf("hold the feed as %s: %d %s", key, r.Status, r.Body)
		}
		if r := apitest.Request(t, srv, "POST", "/v1/feeds/"+h.feed.ID+"/subscribables", feed.Subscribable{Name: "each", Manager: feed.Manager{Kind: feed.EachItem}},
			api.HeaderAPIKey, key); r.Status != http.StatusCreated {
			t.Fatalf("subscribable of %s: %d %s", key, r.Status, r.Body)
		}
	}
	apitest.CheckCap(t, srv, apitest.Cap{Max: 2, Key: "s", OtherKey: "s2",
		Create: func(i int) (string, string, any) {
			return "POST", "/v1/feeds/" + h.feed.ID + "/subscribables/each/subscriptions",
				map[string]any{"destination": feed.Destination{Kind: feed.DestLog, Name: fmt.Sprintf("reader-%d", i)}}
		},
		ID:     func(t testing.TB, r apitest.Response) string { var s feed.Subscription; r.JSON(t, &s); return s.ID },
		Delete: func(id string) string { return "/v1/feed-subscriptions/" + id },
	})
}
