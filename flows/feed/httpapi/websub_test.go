package httpapi_test

import (
	"crypto/hmac"
	"crypto/sha1" //nolint:gosec // a hub may sign with sha1
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dropstream/dropstream/api/apitest"
	"github.com/dropstream/dropstream/flows/feed"
	"github.com/dropstream/dropstream/flows/feed/feedsim"
	"github.com/dropstream/dropstream/flows/feed/httpapi"
	"github.com/dropstream/dropstream/internal/testenv"
)

// hubSim is a WebSub hub: it records the subscription requests it gets.
type hubSim struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []url.Values
}

func newHubSim(t *testing.T) *hubSim {
	h := &hubSim{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.ParseForm() != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		h.reqs = append(h.reqs, r.PostForm)
		h.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hubSim) requests() []url.Values {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]url.Values(nil), h.reqs...)
}

func sign(algo func() hash.Hash, name, secret string, body []byte) string {
	m := hmac.New(algo, []byte(secret))
	m.Write(body)
	return name + "=" + hex.EncodeToString(m.Sum(nil))
}

// The flow subscribes to the hub a feed advertises, the hub verifies the
// intent through the public callback, pushes signed content that goes
// through the same pipeline as polls (a pushed item already seen is not
// sent again), unsigned or mis-signed pushes are refused, the pushed feed
// is polled only as a slow fallback, and the lease is renewed before it
// ends.
func TestWebSub_subscribeVerifyPushAndRenewWithASimulatedHub(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			hub := newHubSim(t)
			const topic = "https://example.org/feed.xml"
			sim := feedsim.New(feedsim.RSS, item("a", "A"))
			sim.SetEtiquette(feedsim.Etiquette{Hub: hub.srv.URL + "/hub", Self: topic})
			h := newHarness(t, b, sim, feed.Feed{IncludeExisting: true}, func(c *feed.Config) {
				if err := c.Egress.Permit(strings.TrimPrefix(hub.srv.URL, "http://")); err != nil {
					t.Fatal(err)
				}
				c.WebSub.Fallback = 6 * time.Hour
			})
			h.subscribe("each", feed.Manager{Kind: feed.EachItem})
			srv := newAPI(t, h.flow)
			h.pollAt(t0)

			reqs := hub.requests()
			if len(reqs) != 1 {
				t.Fatalf("the hub got %d subscription requests, want 1", len(reqs))
			}
			sub := reqs[0]
			secret := sub.Get("hub.secret")
			callback := strings.TrimPrefix(sub.Get("hub.callback"), "http://api.test")
			if sub.Get("hub.mode") != "subscribe" || sub.Get("hub.topic") != topic ||
				!regexp.MustCompile(`^`+feed.WebSubPath+h.feed.ID+`/[0-9a-f]{64}$`).MatchString(callback) ||
				!regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(secret) || sub.Get("hub.lease_seconds") != "864000" {
				t.Fatalf("subscription request %v", sub)
			}
			var v httpapi.FeedView
			if st := call(t, srv, "GET", "/v1/feeds/"+h.feed.ID, nil, &v); st != 200 || v.Polling.WebSub == nil || v.Polling.WebSub.State != feed.WebSubPending {
				t.Fatalf("feed before verification: %d %+v", st, v.Polling.WebSub)
			}

			// Verification of intent: only what the flow asked for.
			verify := func(mode, topic, challenge string) apitest.Response {
				q := url.Values{"hub.mode": {mode}, "hub.topic": {topic}, "hub.challenge": {challenge}, "hub.lease_seconds": {"3600"}}
				return apitest.Request(t, srv, "GET", callback+"?"+q.Encode(), nil)
			}
			if r := verify("subscribe", "https://example.org/other.xml", "c1"); r.Status != 404 {
				t.Errorf("verification of another topic: %d, want 404", r.Status)
			}
			if r := verify("unsubscribe", topic, "c1"); r.Status != 404 {
				t.Errorf("verification of an unsubscription never asked for: %d, want 404", r.Status)
			}
			if r := apitest.Request(t, srv, "GET", feed.WebSubPath+"0123456789abcdef/"+strings.Repeat("0", 64)+"?hub.mode=subscribe&hub.topic=x&hub.challenge=c", nil); r.Status != 404 {
				t.Errorf("verification for an unknown feed: %d, want 404", r.Status)
			}
			if r := verify("subscribe", topic, "challenge-42"); r.Status != 200 || string(r.Body) != "challenge-42" {
				t.Fatalf("verification: %d %q, want 200 and the challenge", r.Status, r.Body)
			}
			call(t, srv, "GET", "/v1/feeds/"+h.feed.ID, nil, &v)
			if w := v.Polling.WebSub; w == nil || w.State != feed.WebSubActive || w.ExpiresAt == nil || !w.ExpiresAt.Equal(t0.Add(time.Hour)) {
				t.Fatalf("after verification: %+v, want active until t0+1h", w)
			}

			// Pushes.
			push := func(body []byte, headers ...string) int {
				return apitest.Request(t, srv, "POST", callback, body, append([]string{"Content-Type", "application/rss+xml"}, headers...)...).Status
			}
			withB := feedsim.New(feedsim.RSS, item("a", "A"), item("b", "B"))
			docB, _, _ := withB.Document()
			if st := push(docB); st != 403 {
				t.Errorf("unsigned push: %d, want 403", st)
			}
			if st := push(docB, "X-Hub-Signature", sign(sha256.New, "sha256", "not the secret", docB)); st != 403 {
				t.Errorf("push signed with another secret: %d, want 403", st)
			}
			if st := push([]byte("not a feed"), "X-Hub-Signature", sign(sha256.New, "sha256", secret, []byte("not a feed"))); st != 422 {
				t.Errorf("signed push of no feed: %d, want 422", st)
			}
			h.settle()
			if got := h.delivered()["each"]; len(got) != 1 {
				t.Fatalf("refused pushes delivered %v", got)
			}
			if st := push(docB, "X-Hub-Signature", sign(sha256.New, "sha256", secret, docB)); st != 202 {
				t.Fatalf("signed push: %d, want 202", st)
			}
			withC := feedsim.New(feedsim.RSS, item("c", "C"), item("b", "B"))
			docC, _, _ := withC.Document()
			if st := push(docC, "X-Hub-Signature", sign(sha1.New, "sha1", secret, docC)); st != 202 {
				t.Fatalf("push signed with sha1: %d, want 202", st)
			}
			h.settle()
			if got, want := h.delivered()["each"], [][]string{{"a"}, {"b"}, {"c"}}; !reflect.DeepEqual(got, want) {
				t.Fatalf("delivered %v, want %v (a polled, b and c pushed, b once)", got, want)
			}

			// Polled only as the fallback while pushed.
			h.pollAt(t0.Add(time.Minute))
			call(t, srv, "GET", "/v1/feeds/"+h.feed.ID, nil, &v)
			if p := v.Polling; p.IntervalReason != feed.ReasonPush || p.NextPoll == nil || !p.NextPoll.Equal(t0.Add(time.Minute+6*time.Hour)) || p.Pushes != 2 {
				t.Errorf("pushed feed: %+v, want the next poll 6h on (push) and 2 pushes", p.FeedStats)
			}

			// Renewal before the lease ends (at half of a 1h lease).
			if n, err := h.poller.RenewWebSub(h.ctx); err != nil || n != 0 {
				t.Errorf("renewal right after verification: %d, %v; want none", n, err)
			}
			h.mu.Lock()
			h.now = t0.Add(31 * time.Minute)
			h.mu.Unlock()
			if n, err := h.poller.RenewWebSub(h.ctx); err != nil || n != 1 {
				t.Fatalf("renewal at t0+31m: %d, %v; want 1", n, err)
			}
			if reqs := hub.requests(); len(reqs) != 2 || reqs[1].Get("hub.topic") != topic || reqs[1].Get("hub.secret") != secret ||
				reqs[1].Get("hub.callback") != reqs[0].Get("hub.callback") {
				t.Fatalf("the hub got %v, want a second subscription with the same topic, callback and secret", reqs)
			}
			if r := verify("subscribe", topic, "again"); r.Status != 200 {
				t.Fatalf("verification of the renewal: %d", r.Status)
			}
			call(t, srv, "GET", "/v1/feeds/"+h.feed.ID, nil, &v)
			if w := v.Polling.WebSub; w == nil || !w.ExpiresAt.Equal(t0.Add(31*time.Minute+time.Hour)) {
				t.Errorf("after renewal: %+v, want active until t0+1h31m", w)
			}
		})
	}
}
