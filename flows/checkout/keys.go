package checkout

import (
	"strconv"

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

// Topics are the flow's streams; they share one partition count, so an
// id's partition and hash tag are the same in each. Stock commands go in
// the partition of their items, payment ones in their user's, saga
// records in their order's.
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

// Keys names the flow's Redis keys. An entity shares its partition's slot
// with its ledger entries and the stream that changes it; an order with its
// sagas and its partition's outcomes and sagas streams.
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
// (the last attempt), status (of the last attempt) and ver (bumped by
// every change of its items).
func (k Keys) Order(id string) string { return k.in(id, "order", id) }

// Call records a store call's outcome under its token, against retries.
func (k Keys) Call(id, token string) string { return k.in(id, "call", token) }

// Saga is the hash of one checkout attempt of an order.
func (k Keys) Saga(orderID string, tr int64) string {
	return k.in(orderID, "saga", orderID, strconv.FormatInt(tr, 10))
}

// Open is the sorted set of the attempts of partition p's orders that have
// not reached a final status ("<order>|<tr>", scored by their start in
// Unix ms): the Sweeper's work list.
func (k Keys) Open(p int) string { return rediskey.Key(k.t.HashTag(p), "co", "open") }

// Ledger is the ledger entry of (order, attempt, is_rollback) of one side
// ("stock" or "payment") in partition p. An attempt is its number and its
// nonce. The value is the effect's result ("ok", "fail:<reason>", "noop"
// or "cancelled").
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

// The id of an item, user or order a tenant other than tenancy.Open
// created starts with the tenant's tenancy.Tag, then '_', so checking a
// call costs no Redis read; only the server makes ids.

// idTag returns the tenant tag an id starts with; "" is tenancy.Open's.
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

// Sees reports whether v may see and change id; to others it does not
// exist.
func Sees(v tenancy.View, id string) bool {
	return v.All || idTag(id) == tenancy.Tag(v.Tenant)
}
