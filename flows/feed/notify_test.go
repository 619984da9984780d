package feed

import (
	"fmt"
	"html"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/flows/feed/feedsim"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier/subscriber"
)

var confirmLink = regexp.MustCompile(`http://api\.test/v1/confirm/([0-9a-f]{64})`)

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
