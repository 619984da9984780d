package httpapi_test

import (
	"crypto/sha256"
	"net/url"
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

// websubCase is a feed advertising a hub, polled once at t0: the flow has
// asked the hub for a subscription.
type websubCase struct {
	h        *harness
	srv      *api.Server
	hub      *hubSim
	topic    string
	callback string // the path the hub was given
	secret   string // the hub.secret the hub was given
}

func newWebSubCase(t *testing.T, b testenv.Backend) websubCase {
	t.Helper()
	hub := newHubSim(t)
	const topic = "https://example.org/feed.xml"
	sim := feedsim.New(feedsim.RSS, item("a", "A"))
	sim.SetEtiquette(feedsim.Etiquette{Hub: hub.srv.URL + "/hub", Self: topic})
	h := newHarness(t, b, sim, feed.Feed{IncludeExisting: true}, func(c *feed.Config) {
		if err := c.Egress.Permit(strings.TrimPrefix(hub.srv.URL, "http://")); err != nil {
			t.Fatal(err)
		}
	})
	srv := newAPI(t, h.flow)
	h.pollAt(t0)
	reqs := hub.requests()
	if len(reqs) != 1 {
		t.Fatalf("the hub got %d subscription requests, want 1", len(reqs))
	}
	return websubCase{h: h, srv: srv, hub: hub, topic: topic,
		callback: strings.TrimPrefix(reqs[0].Get("hub.callback"), "http://api.test"), secret: reqs[0].Get("hub.secret")}
}

// verify sends a verification of intent to path.
func (c websubCase) verify(t *testing.T, path, mode, topic, lease string) apitest.Response {
	t.Helper()
	q := url.Values{"hub.mode": {mode}, "hub.topic": {topic}, "hub.challenge": {"ch"}}
	if lease != "" {
		q.Set("hub.lease_seconds", lease)
	}
	return apitest.Request(t, c.srv, "GET", path+"?"+q.Encode(), nil)
}

// subscription is the feed's WebSub subscription as the API shows it.
func (c websubCase) subscription(t *testing.T) *feed.WebSubView {
	t.Helper()
	var v httpapi.FeedView
	if st := call(t, c.srv, "GET", "/v1/feeds/"+c.h.feed.ID, nil, &v); st != 200 {
		t.Fatalf("GET feed: %d", st)
	}
	return v.Polling.WebSub
}

// A verification of intent is accepted only as the answer to the request
// the flow sent the hub: on the callback the hub was given (its secret
// token), with the mode and topic asked for, before the request expires.
// Forged ones (no token, another token, another mode or topic, too late, a
// year's lease) leave the subscription pending, and the feed polled.
func TestWebSub_forgedVerificationsAreRefused(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			c := newWebSubCase(t, b)
			idPath := feed.WebSubPath + c.h.feed.ID
			otherToken := idPath + "/" + strings.Repeat("ab", 32)
			forged := []struct {
				name, path, mode, topic string
			}{
				{"no token (the feed id alone)", idPath, "subscribe", c.topic},
				{"another token", otherToken, "subscribe", c.topic},
				{"a token's prefix", c.callback[:len(c.callback)-1], "subscribe", c.topic},
				{"another topic", c.callback, "subscribe", "https://example.org/other.xml"},
				{"an unsubscription never asked for", c.callback, "unsubscribe", c.topic},
				{"a denial without the token", idPath, "denied", c.topic},
				{"a denial with another token", otherToken, "denied", c.topic},
				{"a denial of another topic", c.callback, "denied", "https://example.org/other.xml"},
			}
			for _, f := range forged {
				if r := c.verify(t, f.path, f.mode, f.topic, "315360000"); r.Status != 404 {
					t.Errorf("%s: %d %s, want 404", f.name, r.Status, r.Body)
				}
			}
			if w := c.subscription(t); w == nil || w.State != feed.WebSubPending {
				t.Fatalf("after forged verifications: %+v, want pending", w)
			}

			// The request expires: the genuine callback is refused once the
			// retry delay has passed.
			c.h.mu.Lock()
			c.h.now = t0.Add(16 * time.Minute)
			c.h.mu.Unlock()
			if r := c.verify(t, c.callback, "subscribe", c.topic, ""); r.Status != 404 {
				t.Fatalf("verification of an expired request: %d, want 404", r.Status)
			}
			if w := c.subscription(t); w == nil || w.State != feed.WebSubPending {
				t.Fatalf("after a late verification: %+v, want pending", w)
			}
		})
	}
}

// The genuine flow against the hub: verified on its callback, the lease a
// hub grants is capped at the one asked (10 days); a push needs the
// callback's token as well as the signature; a denial on the right
// callback ends the subscription, and pushes are then refused.
func TestWebSub_genuineVerificationLeaseCapAndDenial(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			c := newWebSubCase(t, b)
			if r := c.verify(t, c.callback, "subscribe", c.topic, "315360000"); r.Status != 200 || string(r.Body) != "ch" {
				t.Fatalf("genuine verification: %d %q", r.Status, r.Body)
			}
			if w := c.subscription(t); w == nil || w.State != feed.WebSubActive || w.ExpiresAt == nil || !w.ExpiresAt.Equal(t0.Add(10*24*time.Hour)) {
				t.Fatalf("after verification asking a 10-year lease: %+v, want active until t0+10d", w)
			}
			if r := c.verify(t, c.callback, "subscribe", c.topic, ""); r.Status != 404 {
				t.Errorf("a second verification of the same request: %d, want 404", r.Status)
			}

			doc, _, _ := feedsim.New(feedsim.RSS, item("b", "B")).Document()
			push := func(path string) int {
				return apitest.Request(t, c.srv, "POST", path, doc, "Content-Type", "application/rss+xml",
					"X-Hub-Signature", sign(sha256.New, "sha256", c.secret, doc)).Status
			}
			if st := push(feed.WebSubPath + c.h.feed.ID + "/" + strings.Repeat("ab", 32)); st != 404 {
				t.Errorf("signed push on another token: %d, want 404", st)
			}
			if st := push(c.callback); st != 202 {
				t.Fatalf("signed push on the callback: %d, want 202", st)
			}

			if r := c.verify(t, c.callback, "denied", c.topic, ""); r.Status != 200 {
				t.Fatalf("denial on the callback: %d", r.Status)
			}
			if w := c.subscription(t); w == nil || w.State != feed.WebSubDenied {
				t.Fatalf("after the denial: %+v, want denied", w)
			}
			if st := push(c.callback); st != 404 {
				t.Errorf("push after the denial: %d, want 404", st)
			}
		})
	}
}
