package feed

import (
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
//	ds:{feeds}:subscriptions:<feed>/<name>   sorted set, score 0: subscription ids
//	ds:{feeds}:unique:<feed>/<name>          hash: destination core → subscription id
//	ds:{feeds}:notifier:<core hash>          string: "<subscriber id>|<destination id>", the notifier
//	                                         destination the flow created for a destination core
//	ds:{feeds}:validators                    hash: feed id → poll.Validators JSON
//	ds:{feeds}:failures                      hash: feed id → consecutive failed polls (shared by the poller copies)
//	ds:{feeds}:status                        hash: feed id → PollStatus JSON of the latest poll
//	ds:{feeds}:stats:<id>                    hash: requests, not_modified, bytes, pushes, next_ms,
//	                                         interval_ms, reason, hints (the latest document's poll.Hints)
//	ds:{feeds}:halted                        hash: feed id → Halt JSON (gone or dead: not polled)
//	ds:{feeds}:websub                        hash: feed id → its WebSub subscription JSON (hub, topic, secret)
//	ds:{pace:feed:<host>}:next               string: the host's next request slot (pollgate.Pacer)
//
// Item state lives in the partition of the feed (tag {feed.p}, p the
// partition of the feed id in every feed topic), with the streams the
// scripts append to, so observing, assigning and completing each are one
// atomic script:
//
//	ds:{feed.p}:feed:<id>:item:<iid>         hash: hash, first, checked, stable (ms), state (u|a|c|x|h),
//	                                         refs (collections still to deliver); small, so a listpack
//	ds:{feed.p}:feed:<id>:guids              hash: iid → guid (kept forever, like the item)
//	ds:{feed.p}:feed:<id>:content            hash: iid → item JSON (only while unassigned or assigned)
//	ds:{feed.p}:feed:<id>:poll               string: the feed's poll gate (package pollgate): the copy of the
//	                                         poller polling it, until the next poll is due
//	ds:{feed.p}:feed:<id>:items              sorted set: every iid by first seen
//	ds:{feed.p}:feed:<id>:unassigned         sorted set: iids in state u, by first seen
//	ds:{feed.p}:feed:<id>:meta               hash: first and last (ms of the first and newest document applied),
//	                                         seen (ms of the newest poll answered 200 or 304), held (duplicates), cur:<sub>
//	                                         (within of the sub's open daily, weekly or every-n collection)
//	ds:{feed.p}:feed:<id>:coll:<sub>:<w>     hash: opened, due, completed (ms)
//	ds:{feed.p}:feed:<id>:coll:<sub>:<w>:i   list: the iids assigned to the collection
//	ds:{feed.p}:feed:<id>:open               sorted set: "<sub>\x00<w>" of open collections by due (ms)
//	ds:{feed.p}:feed:<id>:completed          sorted set: "<sub>\x00<w>" of completed collections waiting
//	                                         for their delivery, by completion (ms)
//	ds:{feed.p}:feed:<id>:seq:<sub>          string: the open EveryN collection's number
//	ds:{feed.p}:feed:<id>:dropped            hash: name → 1, subscribables deleted (assignment skips them)
//	ds:{feed.p}:feed:<id>:prints             hash: Fingerprint → iid of the first item with it
//	ds:{feed.p}:feed:<id>:arrivals           list: ms of the latest documents with new items, newest first
//	ds:{feed.p}:collections                  stream: completed collections (Topics.Collections)
//	ds:{feed.p}:history                      stream: item history (Topics.History)
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
