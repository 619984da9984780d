package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/flows/feed"
	"github.com/dropstream/dropstream/flows/feed/feedsim"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/subscriber"
)

func TestFlow_emailSubscriptionConfirmsAndUnsubscribesThroughTheNotifierLinks(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			sim := feedsim.New(feedsim.RSS, item("1", "one"))
			h := newHarness(t, b, sim, feed.Feed{IncludeExisting: true})
			srv := newNotifierAPI(t, h)
			base := "/v1/feeds/" + h.feed.ID + "/subscribables"
			for _, sb := range []feed.Subscribable{{Name: "each", Manager: feed.Manager{Kind: feed.EachItem}}, {Name: "pairs", Manager: feed.Manager{Kind: feed.EveryN, N: 2}}} {
				if code := call(t, srv, "POST", base, sb, nil); code != http.StatusCreated {
					t.Fatalf("POST subscribable %s: %d", sb.Name, code)
				}
			}
			dest := map[string]any{"destination": feed.Destination{Kind: feed.DestEmail, Address: "Buffy <B@Slayers.org>"}}
			var each, again, pairs feed.Subscription
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
			if len(mails) != 1 || !strings.Contains(mails[0].Subject(), "Confirm your subscription to each") {
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
				subjects[m.Subject()] = append(subjects[m.Subject()], m.Parts["text/plain"])
			}
			if len(mails) != 2 || len(subjects["two"]) != 1 || len(subjects["2 new items: pairs"]) != 1 {
				t.Fatalf("mails after confirming %v, want item 2 (each) and items 1 and 2 (pairs)", subjects)
			}
			for _, m := range mails {
				links := []string{"https://example.org/2"}
				if m.Subject() != "two" {
					links = append(links, "https://example.org/1")
				}
				for _, l := range links {
					if !strings.Contains(m.Parts["text/plain"], l) || !strings.Contains(m.Parts["text/html"], l) {
						t.Errorf("mail %q lacks %s in its text or HTML part: %q", m.Subject(), l, m.Parts)
					}
				}
			}
			unsub := unsubscribeLink.FindStringSubmatch(mails[0].Header.Get("List-Unsubscribe"))
			if unsub == nil || !strings.Contains(mails[0].Parts["text/plain"], unsub[1]) {
				t.Fatalf("List-Unsubscribe %q and text %q: want the notifier's unsubscribe link in both",
					mails[0].Header.Get("List-Unsubscribe"), mails[0].Parts["text/plain"])
			}

			if code := call(t, srv, "GET", unsub[2], nil, nil); code != http.StatusOK {
				t.Fatalf("GET the unsubscribe link: %d", code)
			}
			if code := call(t, srv, "POST", unsub[2], nil, nil); code != http.StatusOK {
				t.Fatalf("POST the unsubscribe link: %d", code)
			}
			h.settle()
			if got := h.mailsTo("B@Slayers.org"); len(got) != 4 || got[3].Subject() != "You are unsubscribed" {
				t.Fatalf("%d mails, want the removal notice as the 4th", len(got))
			}
			sim.Add(item("3", "three"), item("4", "four"))
			h.pollAt(t0.Add(2 * time.Minute))
			if got := h.mailsTo("B@Slayers.org"); len(got) != 4 {
				t.Fatalf("%d mails after unsubscribing, want still 4", len(got))
			}
			for _, name := range []string{"each", "pairs"} {
				if subs, err := h.flow.Store().Subscriptions(h.ctx, h.feed.ID, name); err != nil || len(subs) != 0 {
					t.Errorf("%s keeps %d subscriptions after the unsubscribe (%v), want them deleted at delivery", name, len(subs), err)
				}
			}
			want := map[string]string{"1": feed.StateCleared, "2": feed.StateCleared, "3": feed.StateCleared, "4": feed.StateCleared}
			if got := h.states(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("states %v, want %v", got, want)
			}
		})
	}
}

func TestFlow_anAddressTheNotifierHoldsForAnotherSubscriberIsAConflict(t *testing.T) {
	h := newHarness(t, testenv.Backends()[0], feedsim.New(feedsim.RSS), feed.Feed{})
	srv := newNotifierAPI(t, h)
	if _, err := h.subs.Create(h.ctx, subscriber.Subscriber{Name: "Giles",
		Destinations: []subscriber.Destination{{Kind: subscriber.KindEmail, Address: "giles@library.org"}}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.flow.Store().PutSubscribable(h.ctx, feed.Subscribable{FeedID: h.feed.ID, Name: "each", Manager: feed.Manager{Kind: feed.EachItem}}); err != nil {
		t.Fatal(err)
	}
	path := "/v1/feeds/" + h.feed.ID + "/subscribables/each/subscriptions"
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	if code := call(t, srv, "POST", path, map[string]any{"destination": feed.Destination{Kind: feed.DestEmail, Address: "Giles@Library.org"}}, &e); code != http.StatusConflict {
		t.Errorf("subscribing an address another notifier subscriber holds: %d %q, want 409", code, e.Error.Code)
	}
	if code := call(t, srv, "POST", path, map[string]any{"destination": feed.Destination{Kind: feed.DestWebhook, URL: "https://user:pw@hooks.example.org/x"}}, &e); code != http.StatusUnprocessableEntity {
		t.Errorf("a webhook the notifier refuses (credentials in the URL): %d %q, want 422", code, e.Error.Code)
	}
	if subs, _ := h.flow.Store().Subscriptions(h.ctx, h.feed.ID, "each"); len(subs) != 0 {
		t.Errorf("%d subscriptions stored, want none", len(subs))
	}
}
