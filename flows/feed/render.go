package feed

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	htmltemplate "html/template"
	"net/url"
	"strconv"
	texttemplate "text/template"

	"github.com/dropstream/dropstream/flows/feed/poll"
)

//go:embed templates/*.tmpl
var templateFS embed.FS

var (
	textTemplates = texttemplate.Must(texttemplate.ParseFS(templateFS, "templates/*.txt.tmpl"))
	htmlTemplates = htmltemplate.Must(htmltemplate.ParseFS(templateFS, "templates/*.html.tmpl"))
)

// Message is a rendered message: what an e-mail channel sends (Subject,
// Text and HTML as the two parts of a multipart/alternative mail, To) and
// what a webhook receives as its JSON body, with the items themselves.
type Message struct {
	Kind           string      `json:"kind"` // "collection" or "confirm"
	To             string      `json:"to,omitempty"`
	FeedID         string      `json:"feed_id"`
	FeedURL        string      `json:"feed_url"`
	Subscribable   string      `json:"subscribable"`
	SubscriptionID string      `json:"subscription_id"`
	Collection     string      `json:"collection,omitempty"`
	Subject        string      `json:"subject"`
	Text           string      `json:"text"`
	HTML           string      `json:"html"`
	Items          []poll.Item `json:"items,omitempty"`
	ConfirmURL     string      `json:"confirm_url,omitempty"`
	UnsubscribeURL string      `json:"unsubscribe_url"`
}

// view is what the templates see.
type view struct {
	Title, Subscribable, FeedURL, ConfirmURL, UnsubscribeURL string
	Items                                                    []poll.Item
}

// links returns the confirm and unsubscribe URLs of a subscription under
// the API's public base URL.
func links(base string, sub Subscription) (confirm, unsubscribe string) {
	return base + "/v1/feed-links/confirm?token=" + url.QueryEscape(sub.ConfirmToken),
		base + "/v1/feed-links/unsubscribe?token=" + url.QueryEscape(sub.UnsubscribeToken)
}

// renderCollection renders a completed collection for one subscription.
func renderCollection(base string, f Feed, sub Subscription, c Collection) (Message, error) {
	_, unsub := links(base, sub)
	title := strconv.Itoa(len(c.Items)) + " new items: " + c.Subscribable
	if len(c.Items) == 1 {
		title = c.Items[0].Title
		if title == "" {
			title = "New item: " + c.Subscribable
		}
	}
	m := Message{Kind: "collection", To: sub.Destination.address(), FeedID: f.ID, FeedURL: f.URL, Subscribable: c.Subscribable,
		SubscriptionID: sub.ID, Collection: c.Within, Subject: title, Items: c.Items, UnsubscribeURL: unsub}
	return m, render(&m, "collection", view{Title: title, Subscribable: c.Subscribable, FeedURL: f.URL, UnsubscribeURL: unsub, Items: c.Items})
}

// renderConfirm renders the confirmation request of a subscription.
func renderConfirm(base string, f Feed, sub Subscription) (Message, error) {
	confirm, unsub := links(base, sub)
	m := Message{Kind: "confirm", To: sub.Destination.address(), FeedID: f.ID, FeedURL: f.URL, Subscribable: sub.Subscribable,
		SubscriptionID: sub.ID, Subject: "Confirm your subscription to " + sub.Subscribable, ConfirmURL: confirm, UnsubscribeURL: unsub}
	return m, render(&m, "confirm", view{Subscribable: sub.Subscribable, FeedURL: f.URL, ConfirmURL: confirm, UnsubscribeURL: unsub})
}

func render(m *Message, name string, v view) error {
	var text, html bytes.Buffer
	if err := textTemplates.ExecuteTemplate(&text, name+".txt.tmpl", v); err != nil {
		return fmt.Errorf("feed: render %s text: %w", name, err)
	}
	if err := htmlTemplates.ExecuteTemplate(&html, name+".html.tmpl", v); err != nil {
		return fmt.Errorf("feed: render %s html: %w", name, err)
	}
	m.Text, m.HTML = text.String(), html.String()
	return nil
}

// body is the JSON document the channel sends.
func (m Message) body() []byte {
	b, _ := json.Marshal(m)
	return b
}
