package comic

import (
	"strconv"

	"github.com/dropstream/dropstream/internal/rediskey"
	"github.com/dropstream/dropstream/internal/tenancy"
	"github.com/dropstream/dropstream/stream"
)

// Name is the flow name: the prefix of its stages and topics, and of its keys.
const Name = "comic"

// Message types of the flow.
const (
	// TypeJob is a notification job on the jobs topic (payload: Job).
	TypeJob = "comic.job"
	// TypeNotify is a notification request on the notify topic (payload:
	// Request).
	TypeNotify = "comic.notify"
	// TypeEvent is an inventory or sale event on the events topic
	// (payload: Event).
	TypeEvent = "comic.event"
)

// Topics are the flow's streams, all keyed by comic id with one partition
// count, so everything about a comic lives in the slot of {comic.p}.
type Topics struct {
	// Jobs carries one notification job per intake of a comic.
	Jobs stream.Topic
	// Notify carries one notification request per (subscriber, comic).
	Notify stream.Topic
	// Events carries inventory and sale events, for the history.
	Events stream.Topic
}

// NewTopics returns the flow's topics with the given partition count.
func NewTopics(partitions int) Topics {
	return Topics{
		Jobs:   stream.NewTopic(Name, "jobs", partitions),
		Notify: stream.NewTopic(Name, "notify", partitions),
		Events: stream.NewTopic(Name, "events", partitions),
	}
}

// tag returns the hash tag of a comic's partition.
func (t Topics) tag(comicID string) string {
	return t.Jobs.HashTag(t.Jobs.Partition(comicID))
}

// Per-comic keys, in the comic's partition slot.
func inventoryKey(tag, id string) string { return rediskey.Key(tag, "comic", "inv", id) }
func genKey(tag, id string) string       { return rediskey.Key(tag, "comic", "gen", id) }
func jobDoneKey(tag, id string) string   { return rediskey.Key(tag, "comic", "jobdone", id) }
func pendingKey(tag, id string) string   { return rediskey.Key(tag, "comic", "pending", id) }
func notifiedKey(tag, id string) string  { return rediskey.Key(tag, "comic", "notified", id) }
func saleKey(tag, id string) string      { return rediskey.Key(tag, "comic", "sale", id) }
func inventoryIndex(tag string) string   { return rediskey.Key(tag, "comic", "inventory") }
func purchaseKey(tag, txn string) string { return rediskey.Key(tag, "comic", "txn", txn) }
func purchasesKey(tag string) string     { return rediskey.Key(tag, "comic", "purchases") }
func eventsStream(t Topics, id string) string {
	return t.Events.Stream(t.Events.Partition(id))
}

// Subscription keys share the hash tag {comic-subs}, so one script creates
// a subscription with all its index entries.
const subsTag = "{comic-subs}"

const (
	subsKey       = rediskey.Prefix + subsTag + ":comic:subs"       // hash: id → Subscription JSON
	patternsKey   = rediskey.Prefix + subsTag + ":comic:patterns"   // zset: pattern → subscriptions
	patVersionKey = rediskey.Prefix + subsTag + ":comic:patver"     // counter: bumped when a pattern appears or disappears, or a value set gets a new shard
	bloatKey      = rediskey.Prefix + subsTag + ":comic:bloat"      // hash: "<pattern>:<values hash>" → shards past the first
	fieldTotalKey = rediskey.Prefix + subsTag + ":comic:fieldtotal" // hash: field → subscriptions constraining it
	emailPrefix   = rediskey.Prefix + subsTag + ":comic:email:"     // set per email: subscription ids
	tenantEmailPx = rediskey.Prefix + subsTag + ":comic:temail:"    // set per tenant and email: its subscription ids
	indexPrefix   = rediskey.Prefix + subsTag + ":comic:idx:"       // set per (pattern, values, shard): ids; a zset of a ranged pattern
	fieldStatsPfx = rediskey.Prefix + subsTag + ":comic:field:"     // zset per field: index value → subscriptions
)

func emailKey(email string) string { return emailPrefix + email }

// tenantEmailKey is the set of one tenant's subscriptions of email: the
// cap of subscriptions per email counts it, so each tenant has its own.
func tenantEmailKey(tenant, email string) string {
	return tenantEmailPx + tenancy.Of(tenant) + ":" + email
}

// indexKey is shard k of the set of subscription ids of one pattern whose
// values hash to vh (k = 0 for the first shard).
func indexKey(pattern, vh string, k int) string {
	if k == 0 {
		return indexPrefix + pattern + ":" + vh
	}
	return indexPrefix + pattern + ":" + vh + "#" + strconv.Itoa(k)
}

// bloatField names a value set in bloatKey.
func bloatField(pattern, vh string) string { return pattern + ":" + vh }

func fieldStatsKey(field string) string { return fieldStatsPfx + field }
