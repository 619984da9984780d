package feed

import (
	"fmt"
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/flows/feed/feedsim"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier"
	notifierhttp "github.com/dropstream/dropstream/notifier/httpapi"
	"github.com/dropstream/dropstream/notifier/subscriber"
)

var (
	confirmLink     = regexp.MustCompile(`http://api\.test/v1/confirm/([0-9a-f]{64})`)
	unsubscribeLink = regexp.MustCompile(`^<(http://api\.test(/v1/unsubscribe/[0-9a-f]{64}))>$`)
)

// newNotifierAPI serves the feed API and the notifier's subscriber routes
// (the opt-in and unsubscribe links).
func newNotifierAPI(t *testing.T, h *harness) *api.Server {
	t.Helper()
	srv := newAPI(t, h.flow)
	notifierhttp.SubscriberRoutes{Store: h.subs, PublicURL: "http://api.test", Notify: h.flow.deps.Notify}.Register(srv)
	return srv
}

// mailsTo returns the mails received by addr.
func (h *harness) mailsTo(addr string) []mailMsg {
	var out []mailMsg
	for _, m := range h.smtp.received() {
		if m.to == addr {
			out = append(out, m)
		}
	}
	return out
}

// confirmToken returns the opt-in token in a confirmation mail's text and
// HTML parts.
func confirmToken(t *testing.T, m mailMsg) string {
	t.Helper()
	text, htm := confirmLink.FindStringSubmatch(m.parts["text/plain"]), confirmLink.FindStringSubmatch(m.parts["text/html"])
	if text == nil || htm == nil || text[1] != htm[1] {
		t.Fatalf("confirmation mail %q without the notifier's opt-in link in both parts: %q", m.subject(), m.parts)
	}
	return text[1]
}

func TestFlow_emailSubscriptionConfirmsAndUnsubscribesThroughTheNotifierLinks(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			sim := feedsim.New(feedsim.RSS, item("1", "one"))
			h := newHarness(t, b, sim, Feed{IncludeExisting: true})
			srv := newNotifierAPI(t, h)
			base := "/v1/feeds/" + h.feed.ID + "/subscribables"
			for _, sb := range []Subscribable{{Name: "each", Manager: Manager{Kind: EachItem}}, {Name: "pairs", Manager: Manager{Kind: EveryN, N: 2}}} {
				if code := call(t, srv, "POST", base, sb, nil); code != http.StatusCreated {
					t.Fatalf("POST subscribable %s: %d", sb.Name, code)
				}
			}
			dest := map[string]any{"destination": Destination{Kind: DestEmail, Address: "Buffy <B@Slayers.org>"}}
			var each, again, pairs Subscription
			if code := call(t, srv, "POST", base+"/each/subscriptions", dest, &each); code != http.StatusCreated || each.Confirmed ||
				!subscriber.ValidSubscriberID(each.SubscriberID) || each.DestinationID == "" {
				t.Fatalf("POST subscription: %d %+v, want 201, unconfirmed, a notifier subscriber", code, each)
			}
			if code := call(t, srv, "POST", base+"/each/subscriptions", dest, &again); code != http.StatusOK || again.ID != each.ID {
				t.Fatalf("POST the same destination again: %d %+v, want 200 and the same subscription", code, again)
			}
			if code := call(t, srv, "POST", base+"/pairs/subscriptions", dest, &pairs); code != http.StatusCreated ||
				pairs.SubscriberID != each.SubscriberID || pairs.DestinationID != each.DestinationID || pairs.Confirmed {
				t.Fatalf("POST it to another subscribable: %d %+v, want the same notifier destination, unconfirmed", code, pairs)
			}
			h.pollAt(t0) // item 1: unconfirmed, nothing but the confirmation reaches the address
			mails := h.mailsTo("B@Slayers.org")
			if len(mails) != 1 || !strings.Contains(mails[0].subject(), "Confirm your subscription to each") {
				t.Fatalf("%d mails, want only the confirmation request: %+v", len(mails), mails)
			}
			token := confirmToken(t, mails[0])

			// A GET (a link prefetcher) only shows the page; the POST confirms.
			if code := call(t, srv, "GET", notifier.ConfirmPath+token, nil, nil); code != http.StatusOK {
				t.Fatalf("GET the opt-in link: %d", code)
			}
			var page subscriptionPage
			call(t, srv, "GET", base+"/each/subscriptions", nil, &page)
			if len(page.Items) != 1 || page.Items[0].Confirmed {
				t.Fatalf("after a GET of the link: %+v, want one unconfirmed subscription", page.Items)
			}
			if code := call(t, srv, "POST", notifier.ConfirmPath+token, nil, nil); code != http.StatusOK {
				t.Fatalf("POST the opt-in link: %d", code)
			}
			for _, name := range []string{"each", "pairs"} {
				call(t, srv, "GET", base+"/"+name+"/subscriptions", nil, &page)
				if len(page.Items) != 1 || !page.Items[0].Confirmed || page.Items[0].Secret != "" {
					t.Fatalf("%s after confirming: %+v, want one confirmed subscription", name, page.Items)
				}
			}

			sim.Add(item("2", "two"))
			h.pollAt(t0.Add(time.Minute))
			mails = h.mailsTo("B@Slayers.org")[1:]
			subjects := map[string][]string{}
			for _, m := range mails {
				subjects[m.subject()] = append(subjects[m.subject()], m.parts["text/plain"])
			}
			if len(mails) != 2 || len(subjects["two"]) != 1 || len(subjects["2 new items: pairs"]) != 1 {
				t.Fatalf("mails after confirming %v, want item 2 (each) and items 1 and 2 (pairs)", subjects)
			}
			for _, m := range mails {
				links := []string{"https://example.org/2"}
				if m.subject() != "two" {
					links = append(links, "https://example.org/1")
				}
				for _, l := range links {
					if !strings.Contains(m.parts["text/plain"], l) || !strings.Contains(m.parts["text/html"], l) {
						t.Errorf("mail %q lacks %s in its text or HTML part: %q", m.subject(), l, m.parts)
					}
				}
			}
			unsub := unsubscribeLink.FindStringSubmatch(mails[0].header.Get("List-Unsubscribe"))
			if unsub == nil || !strings.Contains(mails[0].parts["text/plain"], unsub[1]) {
				t.Fatalf("List-Unsubscribe %q and text %q: want the notifier's unsubscribe link in both",
					mails[0].header.Get("List-Unsubscribe"), mails[0].parts["text/plain"])
			}

			if code := call(t, srv, "GET", unsub[2], nil, nil); code != http.StatusOK {
				t.Fatalf("GET the unsubscribe link: %d", code)
			}
			if code := call(t, srv, "POST", unsub[2], nil, nil); code != http.StatusOK {
				t.Fatalf("POST the unsubscribe link: %d", code)
			}
			h.settle()
			if got := h.mailsTo("B@Slayers.org"); len(got) != 4 || got[3].subject() != "You are unsubscribed" {
				t.Fatalf("%d mails, want the removal notice as the 4th", len(got))
			}
			sim.Add(item("3", "three"), item("4", "four"))
			h.pollAt(t0.Add(2 * time.Minute))
			if got := h.mailsTo("B@Slayers.org"); len(got) != 4 {
				t.Fatalf("%d mails after unsubscribing, want still 4", len(got))
			}
			for _, name := range []string{"each", "pairs"} {
				if subs, err := h.flow.store.Subscriptions(h.ctx, h.feed.ID, name); err != nil || len(subs) != 0 {
					t.Errorf("%s keeps %d subscriptions after the unsubscribe (%v), want them deleted at delivery", name, len(subs), err)
				}
			}
			want := map[string]string{"1": StateCleared, "2": StateCleared, "3": StateCleared, "4": StateCleared}
			if got := h.states(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("states %v, want %v", got, want)
			}
		})
	}
}

// anchor is how the HTML part of a mail links item i of
// TestFlow_emailListsEveryItemLinkInItsTextAndHTMLParts: its escaped title
// as a link to its escaped URL.
func anchor(i int) string {
	return `<a href="` + html.EscapeString(fmt.Sprintf("https://example.org/items?id=%d&lang=en", i)) + `">` +
		html.EscapeString(fmt.Sprintf("Item %d: tom & jerry <%d>", i, i)) + `</a>`
}

func TestFlow_emailListsEveryItemLinkInItsTextAndHTMLParts(t *testing.T) {
	var items []feedsim.Item
	for i := range 40 {
		it := item(fmt.Sprintf("g%02d", i), fmt.Sprintf("Item %d: tom & jerry <%d>", i, i))
		it.Link = fmt.Sprintf("https://example.org/items?id=%d&lang=en", i)
		items = append(items, it)
	}
	sim := feedsim.New(feedsim.Atom)
	h := newHarness(t, testenv.Backends()[1], sim, Feed{IncludeExisting: true})
	for _, sb := range []Subscribable{{FeedID: h.feed.ID, Name: "fives", Manager: Manager{Kind: EveryN, N: 5}},
		{FeedID: h.feed.ID, Name: "forty", Manager: Manager{Kind: EveryN, N: 40}}} {
		if _, _, err := h.flow.store.PutSubscribable(h.ctx, sb); err != nil {
			t.Fatal(err)
		}
		if _, _, err := h.flow.Subscribe(h.ctx, h.feed.ID, sb.Name, Destination{Kind: DestEmail, Address: "willow@sunnydale.edu"}); err != nil {
			t.Fatal(err)
		}
	}
	h.settle()
	confirms := h.mailsTo("willow@sunnydale.edu")
	if len(confirms) != 1 {
		t.Fatalf("%d mails, want one confirmation request for both subscriptions", len(confirms))
	}
	if _, _, err := h.subs.Confirm(h.ctx, confirmToken(t, confirms[0])); err != nil {
		t.Fatal(err)
	}
	sim.Set(items...)
	h.pollAt(t0)
	mails := h.mailsTo("willow@sunnydale.edu")[1:]
	if len(mails) != 9 {
		t.Fatalf("%d collection mails, want 8 of 5 items and 1 of 40", len(mails))
	}
	seen := map[string]int{}
	for _, m := range mails {
		text, htm := m.parts["text/plain"], m.parts["text/html"]
		if m.subject() == "40 new items: forty" {
			// 40 long items exceed a request's text: the first ones are
			// listed, then a line counts the rest and points to the feed.
			if !strings.Contains(text, "https://example.org/items?id=0&lang=en") || !regexp.MustCompile(`… and \d+ more: `+regexp.QuoteMeta(h.feed.URL)).MatchString(text) {
				t.Errorf("the 40 items' text %q: want the first items, then how many more and the feed", text)
			}
			// The HTML part is the flow's own template, with room for all
			// 40: each item a link.
			for i := range 40 {
				if a := anchor(i); !strings.Contains(htm, a) {
					t.Errorf("the 40 items' HTML part lacks %s: %q", a, htm)
				}
			}
			if strings.Contains(htm, "more at") {
				t.Errorf("the 40 items' HTML part left items out: %q", htm)
			}
			continue
		}
		if m.subject() != "5 new items: fives" {
			t.Errorf("unexpected mail %q", m.subject())
			continue
		}
		for i := range 40 {
			link := fmt.Sprintf("https://example.org/items?id=%d&lang=en", i)
			inText, inHTML := strings.Contains(text, link), strings.Contains(htm, html.EscapeString(link))
			if inText != inHTML {
				t.Errorf("item %d is in the text part %v but in the HTML part %v", i, inText, inHTML)
			}
			if inText {
				seen[link]++
				if title := fmt.Sprintf("Item %d: tom & jerry <%d>", i, i); !strings.Contains(text, title) || !strings.Contains(htm, anchor(i)) {
					t.Errorf("item %d's title missing, unescaped or not a link in %q", i, htm)
				}
			}
		}
	}
	if len(seen) != 40 {
		t.Errorf("the fives' mails list %d distinct item links, want all 40", len(seen))
	}
	for l, n := range seen {
		if n != 1 {
			t.Errorf("%s listed in %d mails, want 1", l, n)
		}
	}
}

func TestFlow_unconfirmedEmailExpiresInTheNotifierAndCanSubscribeAgain(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			sim := feedsim.New(feedsim.RSS, item("1", "one"))
			h := newHarness(t, b, sim, Feed{IncludeExisting: true})
			if _, _, err := h.flow.store.PutSubscribable(h.ctx, Subscribable{FeedID: h.feed.ID, Name: "each", Manager: Manager{Kind: EachItem}}); err != nil {
				t.Fatal(err)
			}
			dest := Destination{Kind: DestEmail, Address: "xander@sunnydale.edu"}
			first, _, err := h.flow.Subscribe(h.ctx, h.feed.ID, "each", dest)
			if err != nil {
				t.Fatal(err)
			}
			h.settle()
			if n, err := h.subs.ExpireUnconfirmed(h.ctx, time.Now().Add(subscriber.DefaultConfirmTTL+time.Minute), 10); n != 1 || err != nil {
				t.Fatalf("expired %d (%v), want 1", n, err)
			}
			if subs, err := h.flow.Subscriptions(h.ctx, h.feed.ID, "each"); err != nil || len(subs) != 0 {
				t.Fatalf("subscriptions after expiry %+v (%v), want none", subs, err)
			}
			h.pollAt(t0)
			if got := h.mailsTo("xander@sunnydale.edu"); len(got) != 1 {
				t.Fatalf("%d mails, want only the first confirmation request", len(got))
			}
			if _, err := h.flow.store.Subscription(h.ctx, first.ID); err == nil {
				t.Error("the expired subscription was not deleted at delivery")
			}
			again, created, err := h.flow.Subscribe(h.ctx, h.feed.ID, "each", dest)
			if err != nil || !created || again.SubscriberID == first.SubscriberID {
				t.Fatalf("subscribing again: %+v created %v (%v), want a new notifier subscriber", again, created, err)
			}
			h.settle()
			if got := h.mailsTo("xander@sunnydale.edu"); len(got) != 2 || confirmToken(t, got[1]) == confirmToken(t, got[0]) {
				t.Fatalf("%d mails, want a second confirmation request with a new link", len(got))
			}
		})
	}
}

func TestFlow_anAddressTheNotifierHoldsForAnotherSubscriberIsAConflict(t *testing.T) {
	h := newHarness(t, testenv.Backends()[0], feedsim.New(feedsim.RSS), Feed{})
	srv := newNotifierAPI(t, h)
	if _, err := h.subs.Create(h.ctx, subscriber.Subscriber{Name: "Giles",
		Destinations: []subscriber.Destination{{Kind: subscriber.KindEmail, Address: "giles@library.org"}}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.flow.store.PutSubscribable(h.ctx, Subscribable{FeedID: h.feed.ID, Name: "each", Manager: Manager{Kind: EachItem}}); err != nil {
		t.Fatal(err)
	}
	path := "/v1/feeds/" + h.feed.ID + "/subscribables/each/subscriptions"
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	if code := call(t, srv, "POST", path, map[string]any{"destination": Destination{Kind: DestEmail, Address: "Giles@Library.org"}}, &e); code != http.StatusConflict {
		t.Errorf("subscribing an address another notifier subscriber holds: %d %q, want 409", code, e.Error.Code)
	}
	if code := call(t, srv, "POST", path, map[string]any{"destination": Destination{Kind: DestWebhook, URL: "https://user:pw@hooks.example.org/x"}}, &e); code != http.StatusUnprocessableEntity {
		t.Errorf("a webhook the notifier refuses (credentials in the URL): %d %q, want 422", code, e.Error.Code)
	}
	if subs, _ := h.flow.store.Subscriptions(h.ctx, h.feed.ID, "each"); len(subs) != 0 {
		t.Errorf("%d subscriptions stored, want none", len(subs))
	}
}
