package watch

import (
	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/internal/rediskey"
	"github.com/dropstream/dropstream/stream"
)

// watcherTag is the hash tag of every watcher key, so one script creates
// and indexes a watcher atomically.
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

// indexKeys are the sets a watcher is filed under: its match set and, for
// a slot watcher, its venue's slot-watcher set.
func indexKeys(w Watcher) []string {
	keys := []string{indexKey(w)}
	if w.Slot != "" {
		if e, err := avail.ParseKey(w.Slot); err == nil {
			keys = append(keys, slotVenueKey(e.Provider, e.Venue))
		}
	}
	return keys
}

// slotVenueKey is the set of slot watchers of a venue.
func slotVenueKey(provider, venue string) string {
	return matchPrefix + "slotvenue:" + provider + "|" + venue
}

// sourceKeys are the index sets that may hold watchers of a source's
// scopes: its provider's, and per venue the venue's and its slot watchers'.
func sourceKeys(provider string, venues []string) []string {
	keys := []string{matchPrefix + "provider:" + provider}
	for _, v := range venues {
		keys = append(keys, matchPrefix+"venue:"+provider+"|"+v, slotVenueKey(provider, v))
	}
	return keys
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
