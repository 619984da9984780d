package feed

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	htmltemplate "html/template"
	"io"
	"net/url"
	"sort"
	"strconv"
	"strings"
	texttemplate "text/template"
	"time"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/flows/feed/poll"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer/sink"
)

// Message types of the feed topics.
const (
	TypePoll       = "feed.poll"
	TypeCollection = "feed.collection"
	TypeItemEvent  = "feed.item_event"
	// typeConfirm messages asked for a confirmation before confirmations
	// went through the notifier; any left on the topic are dropped.
	typeConfirm = "feed.confirm"
)

// Poll is one poll of a feed, on Topics.Polls. A failed fetch (OK false)
// observes nothing but still lets time-based assignment proceed.
type Poll struct {
	FeedID     string `json:"feed_id"`
	PolledAtMs int64  `json:"polled_at_ms"`
	OK         bool   `json:"ok"`
	// NotModified: the server answered 304; nothing to observe.
	NotModified bool        `json:"not_modified,omitempty"`
	Error       string      `json:"error,omitempty"`
	Items       []poll.Item `json:"items,omitempty"`
	// MissingGUIDs and DuplicateGUIDs are the parser's warnings.
	MissingGUIDs   int `json:"missing_guids,omitempty"`
	DuplicateGUIDs int `json:"duplicate_guids,omitempty"`
	// Push: the content a WebSub hub pushed, not a poll's.
	Push bool `json:"push,omitempty"`
}

// PolledAt returns the poll's time.
func (p Poll) PolledAt() time.Time { return time.UnixMilli(p.PolledAtMs) }

// Collection is a completed collection, on Topics.Collections. It carries
// the items' content, so delivery never reads cleared items.
type Collection struct {
	FeedID       string      `json:"feed_id"`
	Subscribable string      `json:"subscribable"`
	Within       string      `json:"within"`
	OpenedMs     int64       `json:"opened_ms"`
	CompletedMs  int64       `json:"completed_ms"`
	IIDs         []string    `json:"iids"`
	Items        []poll.Item `json:"items"`
}

// Item event kinds, the kind column of feed_item_events.
const (
	EventFirstSeen = "first_seen"
	EventEdited    = "edited"
	EventExcluded  = "excluded"
	EventAssigned  = "assigned"
	EventDelivered = "delivered"
	EventCleared   = "cleared"
	// EventHeld: a new item held back as a duplicate of an item seen
	// under another guid (same canonical link and content).
	EventHeld = "held"
)

// ItemEvent is one step of an item's history, on Topics.History. EventID
// is deterministic: the same step gives the same id.
type ItemEvent struct {
	EventID      string `json:"event_id"`
	FeedID       string `json:"feed_id"`
	IID          string `json:"iid"`
	GUID         string `json:"guid"`
	Kind         string `json:"kind"`
	AtMs         string `json:"at_ms"`
	Hash         string `json:"hash"`
	Subscribable string `json:"subscribable"`
	Within       string `json:"within"`
}

// IID is the item id within a feed: 24 hex digits of the guid's hash, so
// keys stay short whatever the guid.
func IID(guid string) string {
	h := sha256.Sum256([]byte(guid))
	return hex.EncodeToString(h[:12])
}

// Item states (whether an item may be assigned), as the API shows them.
const (
	StateUnassigned = "unassigned"
	StateAssigned   = "assigned"
	StateCleared    = "cleared"
	StateExcluded   = "excluded"
	// StateHeld: a duplicate of an item seen under another guid; never
	// sent.
	StateHeld = "held"
)

var stateNames = map[string]string{"u": StateUnassigned, "a": StateAssigned, "c": StateCleared, "x": StateExcluded, "h": StateHeld}

// Fingerprint identifies an item by its canonical link and content hash,
// so an item republished under a new guid is known again; "" without link.
func Fingerprint(it poll.Item) string {
	link := canonicalLink(it.Link)
	if link == "" {
		return ""
	}
	var b strings.Builder
	for _, s := range []string{link, it.Title, it.Author, it.Description} {
		b.WriteString(s)
		b.WriteByte(0)
	}
	if !it.Published.IsZero() {
		b.WriteString(it.Published.UTC().Format(time.RFC3339))
	}
	h := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(h[:12])
}

// canonicalLink is the form of an item link that names the item.
func canonicalLink(raw string) string {
	u, err := url.Parse(NormalizeURL(raw))
	if err != nil || u.Host == "" {
		return strings.TrimSpace(raw)
	}
	q := u.Query()
	for k := range q {
		if strings.HasPrefix(strings.ToLower(k), "utm_") {
			q.Del(k)
		}
	}
	u.RawQuery = q.Encode()
	u.Path = strings.TrimSuffix(u.Path, "/")
	return u.String()
}

// HistoryConfig configures the "feed-history" stage: feed.history events
// become feed_item_events rows, collapsed by event id.
func (f *Flow) HistoryConfig() sink.HistoryConfig[clickhouse.FeedItemEventRow] {
	return sink.HistoryConfig[clickhouse.FeedItemEventRow]{Stage: StageHistory, Topic: f.topics.History,
		Tables: []string{clickhouse.TableFeedItemEvents},
		Rows:   historyRows, Insert: clickhouse.InsertFeedItemEvents}
}

// historyRows decodes a history event into its row.
func historyRows(m *stream.Message) ([]clickhouse.FeedItemEventRow, error) {
	e, err := decode[ItemEvent](m, TypeItemEvent)
	if err != nil {
		return nil, err
	}
	at, err := strconv.ParseInt(e.AtMs, 10, 64)
	if err != nil || e.EventID == "" || len(e.EventID) > 512 || len(e.GUID) > 2048 {
		return nil, stream.Permanentf("feed: history event %q malformed", clip(e.EventID, 64))
	}
	return []clickhouse.FeedItemEventRow{{EventID: e.EventID, FeedID: e.FeedID, IID: e.IID, GUID: e.GUID, Kind: e.Kind,
		At: time.UnixMilli(at), ContentHash: e.Hash, Subscribable: e.Subscribable, Within: e.Within, TraceID: flow.TraceIDOf(m.TraceParent)}}, nil
}

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
	var ferr error
	n := sort.Search(len(all), func(n int) bool { // the longest prefix that fits has n items
		s, err := first(n + 1)
		ferr = cmp.Or(ferr, err)
		return err != nil || len(s) > limit
	})
	if s, err = first(n); ferr != nil || err != nil {
		return "", cmp.Or(ferr, err)
	}
	return clip(s, limit), nil
}
