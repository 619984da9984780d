package feed

import (
	"bytes"
	"cmp"
	"embed"
	"encoding/json"
	"fmt"
	htmltemplate "html/template"
	"io"
	"strconv"
	texttemplate "text/template"

	"github.com/dropstream/dropstream/flows/feed/poll"
	"github.com/dropstream/dropstream/notifier"
)

//go:embed templates/*.tmpl
var templateFS embed.FS

var (
	textTemplates = texttemplate.Must(texttemplate.ParseFS(templateFS, "templates/*.txt.tmpl"))
	htmlTemplates = htmltemplate.Must(htmltemplate.ParseFS(templateFS, "templates/*.html.tmpl"))
)

// Message is a rendered message: subject, text and HTML bodies, and the
// items.
type Message struct {
	Kind         string `json:"kind"` // "collection" or "confirm"
	FeedID       string `json:"feed_id"`
	FeedURL      string `json:"feed_url"`
	Subscribable string `json:"subscribable"`
	// SubscriptionID is set for log destinations.
	SubscriptionID string `json:"subscription_id,omitempty"`
	Collection     string `json:"collection,omitempty"`
	Subject        string `json:"subject"`
	Text           string `json:"text,omitempty"`
	HTML           string `json:"html,omitempty"`
	// HTMLBody is the HTML body as a fragment for e-mail
	// (notifier.Request.HTML): as many items as fit notifier.MaxHTMLLen.
	HTMLBody   string      `json:"-"`
	Items      []poll.Item `json:"items,omitempty"`
	ConfirmURL string      `json:"confirm_url,omitempty"`
}

// view is what the templates see. More counts the items left out of a
// text that had to fit notifier.MaxTextLen.
type view struct {
	Title, Subscribable, FeedURL, ConfirmURL string
	Items                                    []poll.Item
	More                                     int
}

// renderCollection renders a completed collection; the text lists as many
// items as fit notifier.MaxTextLen and counts the rest.
func renderCollection(f Feed, c Collection) (Message, error) {
	name := displayName(c.Subscribable) // as its tenant named it
	title := strconv.Itoa(len(c.Items)) + " new items: " + name
	if len(c.Items) == 1 {
		title = cmp.Or(c.Items[0].Title, "New item: "+name)
	}
	title = clip(title, notifier.MaxTextLen)
	m := Message{Kind: "collection", FeedID: f.ID, FeedURL: f.URL, Subscribable: name, Collection: c.Within,
		Subject: title, Items: c.Items}
	v := view{Title: title, Subscribable: name, FeedURL: f.URL, Items: c.Items}
	return m.render(v)
}

// renderConfirm renders the confirmation request of a subscription to a
// subscribable, with its opt-in link.
func renderConfirm(f Feed, subscribable, confirmURL string) (Message, error) {
	m := Message{Kind: "confirm", FeedID: f.ID, FeedURL: f.URL, Subscribable: subscribable,
		Subject: "Confirm your subscription to " + subscribable, ConfirmURL: confirmURL}
	v := view{Subscribable: subscribable, FeedURL: f.URL, ConfirmURL: confirmURL}
	return m.render(v)
}

// render sets m's HTML page, HTML body and text from the templates of
// m.Kind: "<kind>.html.tmpl", the fragment "<kind>-body" and "<kind>.txt.tmpl".
func (m Message) render(v view) (Message, error) {
	var err error
	if m.HTML, err = renderer(htmlTemplates, m.Kind+".html.tmpl")(v); err != nil {
		return Message{}, err
	}
	if m.HTMLBody, err = fit(v, notifier.MaxHTMLLen, renderer(htmlTemplates, m.Kind+"-body")); err != nil {
		return Message{}, err
	}
	m.Text, err = fit(v, notifier.MaxTextLen, renderer(textTemplates, m.Kind+".txt.tmpl"))
	return m, err
}

// renderer renders the template (or defined fragment) name of ts.
func renderer(ts interface {
	ExecuteTemplate(w io.Writer, name string, data any) error
}, name string) func(view) (string, error) {
	return func(v view) (string, error) {
		var b bytes.Buffer
		if err := ts.ExecuteTemplate(&b, name, v); err != nil {
			return "", fmt.Errorf("feed: render %s: %w", name, err)
		}
		return b.String(), nil
	}
}

// fit renders v with as many of its items as fit limit bytes, the first
// ones (the template counts the others in View.More).
func fit(v view, limit int, render func(view) (string, error)) (string, error) {
	all := v.Items
	first := func(n int) (string, error) {
		v.Items, v.More = all[:n], len(all)-n
		return render(v)
	}
	s, err := first(len(all))
	if err != nil || len(s) <= limit {
		return s, err
	}
	lo, hi := 0, len(all) // the longest prefix that fits is in [lo, hi)
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if s, err = first(mid); err != nil {
			return "", err
		}
		if len(s) <= limit {
			lo = mid
		} else {
			hi = mid
		}
	}
	if s, err = first(lo); err != nil {
		return "", err
	}
	return clip(s, limit), nil
}

// body is the JSON document a log destination receives.
func (m Message) body() []byte {
	b, _ := json.Marshal(m)
	return b
}
