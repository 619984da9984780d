package checkout

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dropstream/dropstream/internal/rediskey"
	"github.com/dropstream/dropstream/internal/tenancy"
	"github.com/dropstream/dropstream/stream"
)

// Name is the flow name, prefix of its hash tags and topics.
const Name = "checkout"

// Message types of the flow's streams.
const (
	TypeCommand = "checkout.command" // a stock or payment command (effect or compensation).
	TypeSaga    = "checkout.saga"    // the record of a finished attempt, for analytics.
)

// Topics are the flow's streams: stock commands in their items' partition,
// payment ones in their user's, sagas in their order's.
type Topics struct {
	Stock, Payment, Sagas stream.Topic
}

// NewTopics returns the flow's topics with the given partition count.
func NewTopics(partitions int) Topics {
	return Topics{
		Stock:   stream.NewTopic(Name, "stock", partitions),
		Payment: stream.NewTopic(Name, "payment", partitions),
		Sagas:   stream.NewTopic(Name, "sagas", partitions),
	}
}

// Keys names the flow's Redis keys; each is in the slot of its id's
// partition, with the ledger and streams that change it.
type Keys struct{ t stream.Topic }

// NewKeys returns the key names for a partition count.
func NewKeys(partitions int) Keys { return Keys{t: stream.NewTopic(Name, "keys", partitions)} }

// Partition returns the partition of an id (item, user or order).
func (k Keys) Partition(id string) int { return k.t.Partition(id) }

// Tag returns the hash tag of partition p.
func (k Keys) Tag(p int) string { return k.t.HashTag(p) }

// in is the key of parts in the slot of id's partition.
func (k Keys) in(id string, parts ...string) string {
	return rediskey.Key(k.t.HashTag(k.Partition(id)), append([]string{"co"}, parts...)...)
}

// Item is the hash {stock, price} of an item.
func (k Keys) Item(id string) string { return k.in(id, "item", id) }

// User is the hash {credit} of a user.
func (k Keys) User(id string) string { return k.in(id, "user", id) }

// Order is the hash of an order: user_id, items, total_cost, paid, tr
// (the last attempt), status (its status) and ver (bumped by item changes).
func (k Keys) Order(id string) string { return k.in(id, "order", id) }

// Call records a store call's outcome under its token, against retries.
func (k Keys) Call(id, token string) string { return k.in(id, "call", token) }

// Saga is the hash of one checkout attempt of an order.
func (k Keys) Saga(orderID string, tr int64) string {
	return k.in(orderID, "saga", orderID, strconv.FormatInt(tr, 10))
}

// Open is the sorted set of partition p's unfinished attempts
// ("<order>|<tr>" by start ms): the sweeper's work list.
func (k Keys) Open(p int) string { return rediskey.Key(k.t.HashTag(p), "co", "open") }

// Ledger is the entry of (order, attempt number and nonce, is_rollback) of
// side "stock" or "payment" in partition p; it holds the effect's result.
func (k Keys) Ledger(p int, side, orderID string, tr int64, nonce string, rollback bool) string {
	rb, attempt := "0", strconv.FormatInt(tr, 10)
	if rollback {
		rb = "1"
	}
	if nonce != "" {
		attempt += "-" + nonce
	}
	return rediskey.Key(k.t.HashTag(p), "ledger", "checkout-"+side, orderID, attempt, rb)
}

// DoneChannel is the Pub/Sub channel announcing finished attempts
// ("<order>|<tr>|<status>|<reason>") to the waiting HTTP calls.
const DoneChannel = rediskey.Prefix + "checkout:done"

// idTag returns the tenant tag an id starts with ("<tag>_"); "" is
// tenancy.Open's. Only the server makes ids, so a check reads no Redis.
func idTag(id string) string {
	if len(id) <= tenancy.TagLen || id[tenancy.TagLen] != '_' || !tenancy.IsTag(id[:tenancy.TagLen]) {
		return ""
	}
	return id[:tenancy.TagLen]
}

// NewIDOf returns a new item, user or order id of tenant.
func NewIDOf(tenant string) string {
	if tag := tenancy.Tag(tenant); tag != "" {
		return tag + "_" + newID()
	}
	return newID()
}

// Sees reports whether v may see and change id; to others it does not exist.
func Sees(v tenancy.View, id string) bool {
	return v.All || idTag(id) == tenancy.Tag(v.Tenant)
}

// Command types: "sub"/"add" on the stock topic, "pay"/"can" on the
// payment topic; "add" and "can" compensate.
const (
	CmdSubtract = "sub"
	CmdAdd      = "add"
	CmdPay      = "pay"
	CmdCancel   = "can"
)

// Saga statuses (saga and order hashes, sagas stream, ClickHouse).
const (
	StatusPending      = "pending"
	StatusCompensating = "compensating"
	StatusSucceeded    = "succeeded"
	StatusFailed       = "failed"
)

// Results of a part that never answered (given up, or cancelled by an
// operator); both compensate it.
const (
	ResultAbandoned = "abandoned"
	ResultCancelled = "cancelled"
)

// Line is an item and a quantity.
type Line struct {
	ID     string `json:"id"`
	Amount int64  `json:"amnt"`
}

// Command is a stock or payment command of one attempt. Part is "pay" or
// "stock.<p>" (the items in partition p). Nonce, drawn at the begin, tells
// the attempt from one of the same number a Redis failover lost.
type Command struct {
	OrderID string `json:"order_id"`
	TrNum   int64  `json:"tr_num"`
	Nonce   string `json:"nonce,omitempty"`
	Type    string `json:"type"`
	Part    string `json:"part"`
	UserID  string `json:"user_id,omitempty"`
	Amount  int64  `json:"amnt,omitempty"`
	Items   []Line `json:"items,omitempty"`
}

// Rollback reports whether the command is a compensation.
func (c Command) Rollback() bool { return c.Type == CmdAdd || c.Type == CmdCancel }

// Payment reports whether the command is the payment stage's.
func (c Command) Payment() bool { return c.Type == CmdPay || c.Type == CmdCancel }

// Compensation returns the command that undoes c.
func (c Command) Compensation() Command {
	switch c.Type {
	case CmdSubtract:
		c.Type = CmdAdd
	case CmdPay:
		c.Type = CmdCancel
	}
	return c
}

// Saga is a finished attempt's record (sagas topic, checkout_sagas).
type Saga struct {
	OrderID     string `json:"order_id"`
	TrNum       int64  `json:"tr_num"`
	UserID      string `json:"user_id"`
	Status      string `json:"status"`
	Reason      string `json:"reason"`
	TotalCost   int64  `json:"total_cost"`
	Parts       int    `json:"parts"`
	Compensated int    `json:"compensated"`
	StartedMs   int64  `json:"started_ms"`
	DecidedMs   int64  `json:"decided_ms"`
	FinishedMs  int64  `json:"finished_ms"`
	TraceParent string `json:"traceparent"`
	// Steps are the parts' answers, in the order of the saga's parts.
	Steps []SagaStep `json:"steps,omitempty"`
}

// SagaStep is one part's answer ("ok", "fail:<reason>", "abandoned",
// "cancelled") and its compensation's ("ok", "noop"), if any.
type SagaStep struct {
	Part   string `json:"part"`
	Result string `json:"result"`
	Undo   string `json:"undo,omitempty"`
}

// Limits on outside input (ids are [A-Za-z0-9_-]; MaxBatch bounds a
// batch_init's counts). MaxAmount bounds stock, credit and a change of
// either, so sums stay exact in Lua's doubles (below 2^53).
const (
	MaxIDLen    = 64
	MaxLines    = 100
	MaxQuantity = 10_000
	MaxPrice    = 1_000_000_000
	MaxAmount   = 1_000_000_000_000_000
	MaxBatch    = 100_000
)

// ValidID reports whether s is a well-formed id.
func ValidID(s string) bool {
	return len(s) > 0 && len(s) <= MaxIDLen && strings.Trim(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") == ""
}

// ParseLines parses the order hash's items field, "id:qty,id:qty".
func ParseLines(s string) ([]Line, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	out := make([]Line, 0, len(parts))
	for _, p := range parts {
		id, qty, ok := strings.Cut(p, ":")
		n, err := strconv.ParseInt(qty, 10, 64)
		if !ok || err != nil || !ValidID(id) {
			return nil, fmt.Errorf("checkout: malformed item line %q", p)
		}
		out = append(out, Line{ID: id, Amount: n})
	}
	return out, nil
}
