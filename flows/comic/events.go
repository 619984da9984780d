package comic

import (
	"encoding/json"

	"github.com/redis/go-redis/v9"
)

// Event kinds on the events topic.
const (
	EventListed   = "listed"   // a comic entered inventory
	EventNotified = "notified" // a subscriber was notified of a comic
	EventSold     = "sold"     // a comic was sold and left inventory
	// EventForgotten: a notification was removed after a refund, so the
	// subscriber is notified again if the comic comes back.
	EventForgotten = "forgotten"
)

// Event is a TypeEvent payload, in the order of the comic's partition.
type Event struct {
	Kind    string          `json:"kind"`
	ComicID string          `json:"comic_id"`
	Gen     int64           `json:"gen"`
	AtMs    int64           `json:"at_ms"`
	Comic   json.RawMessage `json:"comic,omitempty"`
	// Email and SubscriptionID are set for notified, sold and forgotten.
	Email          string `json:"email,omitempty"`
	SubscriptionID string `json:"subscription_id,omitempty"`
	// TxnID and PriceCents are set for sold.
	TxnID      string `json:"txn_id,omitempty"`
	PriceCents int64  `json:"price_cents,omitempty"`
	TraceID    string `json:"trace_id,omitempty"`
	ListedAtMs int64  `json:"listed_at_ms,omitempty"` // for sold
}

// Sale is the record of a sold comic.
type Sale struct {
	ComicID    string `json:"comic_id"`
	Gen        int64  `json:"gen"`
	Email      string `json:"email"`
	TxnID      string `json:"txn_id"`
	PriceCents int64  `json:"price_cents"`
	AtMs       int64  `json:"at_ms"`
}

// forgetScript: KEYS notified, delivery ledger key, events stream; ARGV
// email, event JSON, comic id.
var forgetScript = redis.NewScript(`
local n = redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[2])
if n == 1 then redis.call('XADD', KEYS[3], '*', 'key', ARGV[3], 'type', 'comic.event', 'payload', ARGV[2]) end
return n`)

// jsonString encodes s as a JSON string.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// StageHistory is the stage that writes the events topic to ClickHouse.
const StageHistory = "comic-history"
