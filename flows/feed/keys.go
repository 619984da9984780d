package feed

import (
	_ "embed"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/rediskey"
	"github.com/dropstream/dropstream/stream"
)

// Name is the flow's name: the flow of its topics and keys, the prefix of
// its stages and services.
const Name = "feed"

// Redis layout. Definitions share the hash tag {feeds}, so one script
// creates a subscription and its uniqueness entry atomically:
//
//	ds:{feeds}:feeds                         hash: feed id → Feed JSON
//	ds:{feeds}:subscribables:<feed id>       hash: name → Subscribable JSON
//	ds:{feeds}:subscription:<id>             string: Subscription JSON
//	ds:{feeds}:subscriptions:<feed>/<name>   sorted set: subscription ids
//	ds:{feeds}:unique:<feed>/<name>          hash: destination core → subscription id
//	ds:{feeds}:notifier:<core hash>          string: "<subscriber id>|<destination id>"
//	ds:{feeds}:validators|failures|status    hash: feed id → Validators, failed polls, PollStatus
//	ds:{feeds}:stats:<id>                    hash: the feed's poll figures and hints
//	ds:{feeds}:halted|websub                 hash: feed id → Halt, WebSub subscription JSON
//	ds:{pace:feed:<host>}:next               string: the host's next request slot
//
// Item state lives in the feed's partition (tag {feed.p}) with the streams
// the scripts append to, so each script is atomic:
//
//	ds:{feed.p}:feed:<id>:item:<iid>         hash: hash, first, checked, stable, state (u|a|c|x|h), refs
//	ds:{feed.p}:feed:<id>:guids|content      hash: iid → guid (forever), item JSON (until released)
//	ds:{feed.p}:feed:<id>:poll               string: the feed's poll gate
//	ds:{feed.p}:feed:<id>:items|unassigned   sorted set: iids by first seen (all, state u)
//	ds:{feed.p}:feed:<id>:meta               hash: first, last, seen, held, cur:<sub>
//	ds:{feed.p}:feed:<id>:coll:<sub>:<w>[:i] hash: opened, due, completed; list: its iids
//	ds:{feed.p}:feed:<id>:open|completed     sorted set: "<sub>\x00<w>" by due, by completion
//	ds:{feed.p}:feed:<id>:seq:<sub>          string: the open EveryN collection's number
//	ds:{feed.p}:feed:<id>:dropped|prints     hash: deleted subscribables; Fingerprint → iid
//	ds:{feed.p}:feed:<id>:arrivals           list: ms of documents with new items, newest first
//	ds:{feed.p}:collections|history          streams (Topics.Collections, Topics.History)
const defsTag = "{feeds}"

func defsKey(suffix string) string { return rediskey.Key(defsTag, suffix) }

// Topics are the feed flow's streams.
type Topics struct {
	// Polls carries one Poll per fetch of a feed (or a tick when the fetch
	// failed), keyed by feed id.
	Polls stream.Topic
	// Collections carries completed collections, keyed by feed id.
	Collections stream.Topic
	// History carries item history events for ClickHouse.
	History stream.Topic
}

// NewTopics returns the topics with the given partition count.
func NewTopics(partitions int) Topics {
	return Topics{
		Polls:       stream.NewTopic(Name, "polls", partitions),
		Collections: stream.NewTopic(Name, "collections", partitions),
		History:     stream.NewTopic(Name, "history", partitions),
	}
}

// feedPrefix is the prefix of a feed's item keys in its partition.
func (t Topics) feedPrefix(feedID string) string {
	p := t.Polls.Partition(feedID)
	return rediskey.Key(t.Polls.HashTag(p), "feed", feedID, "")
}

// The item scripts, in lua/: history.lua appends an item event; release.lua
// releases an item from a collection and clears it when none waits for it.
var (
	//go:embed lua/history.lua
	luaHistory string
	//go:embed lua/release.lua
	luaRelease string
	//go:embed lua/observe.lua
	luaObserve string
	//go:embed lua/assign.lua
	luaAssign string
	//go:embed lua/cleanup.lua
	luaCleanup string
	//go:embed lua/drop.lua
	luaDrop string
	//go:embed lua/exclude.lua
	luaExclude string
)

// observeScript applies a successful poll or push to a feed's items and
// returns {-1,0,0,0} for a stale poll, else {0, new, edited, held}.
// KEYS[1] meta. ARGV: prefix, now ms, include_existing, hist, tp, feed,
// keep, then (iid, guid, hash, content, order, fingerprint) per item.
var observeScript = redis.NewScript(luaHistory + luaObserve)

// assignScript assigns assignable items to the subscribables' collections,
// then completes and publishes the due ones, atomically.
// KEYS[1] meta. ARGV: prefix, now, min ms, await ms, max ms, colls, hist,
// tp, feed, limit, collcap, seen, then (name, kind, within, due, n) per
// subscribable. Returns {assigned, completed}.
var assignScript = redis.NewScript(luaHistory + luaAssign)

// cleanupScript records a delivered collection's items, releases them and
// deletes the collection; idempotent.
// KEYS[1] meta. ARGV: prefix, now, hist, tp, feed, name, within.
var cleanupScript = redis.NewScript(luaHistory + luaRelease + luaCleanup)

// dropScript drops a deleted subscribable: it releases its open
// collections' items undelivered and deletes them; idempotent.
// KEYS[1] meta. ARGV: prefix, now, hist, tp, feed, name. Returns the
// items released.
var dropScript = redis.NewScript(luaHistory + luaRelease + luaDrop)

// excludeScript marks an Unassigned item Excluded. KEYS[1] meta. ARGV:
// prefix, now, hist, tp, feed, iid. Returns the state before.
var excludeScript = redis.NewScript(luaHistory + luaExclude)

// ms reads a time the scripts keep as decimal milliseconds; the zero time
// when s is not one.
func ms(s string) time.Time {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(n).UTC()
}

// num reads a count the scripts keep as a decimal; 0 when s is not one.
func num(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}
