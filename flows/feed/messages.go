package feed

import (
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/flows/feed/poll"
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
