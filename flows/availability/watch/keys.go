package watch

import (
	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/internal/rediskey"
	"github.com/dropstream/dropstream/stream"
)

// watcherTag is the hash tag of every watcher key: watchers, their list and
// the match index live in one Redis Cluster slot, so one script creates a
// watcher and indexes it atomically.
const watcherTag = "{notifier}"

// Keys of the watcher store; see the package documentation.
const (
	watcherPrefix = rediskey.Prefix + watcherTag + ":watcher:"
	watchersKey   = rediskey.Prefix + watcherTag + ":watchers"
	matchPrefix   = rediskey.Prefix + watcherTag + ":match:"
)

func watcherKey(id string) string { return watcherPrefix + id }

// indexKey is the one match-index set a watcher is filed under: its most
// specific constraint (slot, else venue, else provider).
func indexKey(w Watcher) string {
	switch {
	case w.Slot != "":
		return matchPrefix + "slot:" + w.Slot
	case w.Venue != "":
		return matchPrefix + "venue:" + w.Provider + "|" + w.Venue
	default:
		return matchPrefix + "provider:" + w.Provider
	}
}

// matchKeys are the index sets that may hold watchers of an entity.
func matchKeys(e avail.Entity) []string {
	keys := []string{matchPrefix + "slot:" + e.Key}
	if e.Provider != "" {
		keys = append(keys, matchPrefix+"provider:"+e.Provider)
		if e.Venue != "" {
			keys = append(keys, matchPrefix+"venue:"+e.Provider+"|"+e.Venue)
		}
	}
	return keys
}

// eventsKey is the sorted set of an entity's recent raw opens and closes,
// in the partition of the transition stream that carries them.
func eventsKey(topic stream.Topic, partition int, entityKey string) string {
	return rediskey.Key(topic.HashTag(partition), "notifier", "events", entityKey)
}
