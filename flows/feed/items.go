package feed

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/flows/feed/poll"
)

// ItemView is an item as the API shows it. A cleared item has no content.
type ItemView struct {
	IID       string    `json:"iid"`
	GUID      string    `json:"guid"`
	Hash      string    `json:"hash"`
	State     string    `json:"state"`
	FirstSeen time.Time `json:"first_seen"`
	// LastChecked is the last poll that found the item in the feed (a 304
	// counts when the last document listed it).
	LastChecked time.Time `json:"last_checked"`
	// StableSince is when its content (hash) last changed, or first seen.
	StableSince time.Time  `json:"stable_since"`
	Content     *poll.Item `json:"content,omitempty"`
}

// Items returns up to limit items of a feed by first seen, from offset.
func (f *Flow) Items(ctx context.Context, feedID string, offset, limit int) ([]ItemView, error) {
	if !validID(feedID) {
		return nil, ErrNotFound
	}
	prefix := f.topics.feedPrefix(feedID)
	iids, err := f.rdb.ZRange(ctx, prefix+"items", int64(offset), int64(offset+limit-1)).Result()
	if err != nil {
		return nil, fmt.Errorf("feed: items: %w", err)
	}
	if len(iids) == 0 {
		return []ItemView{}, nil
	}
	pipe := f.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(iids))
	for i, iid := range iids {
		cmds[i] = pipe.HGetAll(ctx, prefix+"item:"+iid)
	}
	guids := pipe.HMGet(ctx, prefix+"guids", iids...)
	contents := pipe.HMGet(ctx, prefix+"content", iids...)
	meta := pipe.HMGet(ctx, prefix+"meta", "last", "seen")
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("feed: items: %w", err)
	}
	last, _ := meta.Val()[0].(string)
	seen, _ := meta.Val()[1].(string)
	out := make([]ItemView, 0, len(iids))
	for i, c := range cmds {
		h := c.Val()
		if len(h) == 0 {
			continue
		}
		guid, _ := guids.Val()[i].(string)
		v := ItemView{IID: iids[i], GUID: guid, Hash: h["hash"], State: stateNames[h["state"]],
			FirstSeen: ms(h["first"]), LastChecked: ms(h["checked"]), StableSince: ms(h["stable"])}
		if h["checked"] == last && ms(seen).After(v.LastChecked) {
			v.LastChecked = ms(seen) // the feed answered 304 since
		}
		if c, _ := contents.Val()[i].(string); c != "" {
			var it poll.Item
			if json.Unmarshal([]byte(c), &it) == nil {
				v.Content = &it
			}
		}
		out = append(out, v)
	}
	return out, nil
}

// Collection states, as the API shows them.
const (
	CollectionOpen      = "open"
	CollectionCompleted = "completed"
)

// maxCollectionsListed bounds the collections one call returns.
const maxCollectionsListed = 1000

// noDue is the due time of a collection that completes by its size (every
// n), not by time.
const noDue = 9000000000000000

// CollectionView is a collection as the API shows it: open, or completed
// and awaiting delivery. A delivered collection is deleted.
type CollectionView struct {
	Within string `json:"within"`
	State  string `json:"state"`
	// Opened is when its first item was assigned to it.
	Opened time.Time `json:"opened"`
	// Due is when the collection completes by time: the end of a daily or
	// weekly window (an each-item collection completes when opened).
	Due *time.Time `json:"due,omitempty"`
	// Completed is when it was completed and forwarded to its delivery.
	Completed *time.Time `json:"completed,omitempty"`
	Items     int64      `json:"items"`
}

// Collections returns the open collections of a subscribable by due time,
// then the completed undelivered ones, at most maxCollectionsListed.
func (f *Flow) Collections(ctx context.Context, feedID, name string) ([]CollectionView, error) {
	if !validID(feedID) || !validKey(name) {
		return nil, ErrNotFound
	}
	prefix := f.topics.feedPrefix(feedID)
	pipe := f.rdb.Pipeline()
	open := pipe.ZRange(ctx, prefix+"open", 0, -1)
	done := pipe.ZRange(ctx, prefix+"completed", 0, -1)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("feed: collections: %w", err)
	}
	var withins []string
	for _, m := range append(open.Val(), done.Val()...) {
		if w, ok := strings.CutPrefix(m, name+"\x00"); ok && len(withins) < maxCollectionsListed {
			withins = append(withins, w)
		}
	}
	pipe = f.rdb.Pipeline()
	hashes := make([]*redis.SliceCmd, len(withins))
	lens := make([]*redis.IntCmd, len(withins))
	for i, w := range withins {
		ck := prefix + "coll:" + name + ":" + w
		hashes[i] = pipe.HMGet(ctx, ck, "opened", "due", "completed")
		lens[i] = pipe.LLen(ctx, ck+":i")
	}
	if _, err := pipe.Exec(ctx); err != nil { // none queued: nil
		return nil, fmt.Errorf("feed: collections: %w", err)
	}
	out := make([]CollectionView, 0, len(withins))
	for i, w := range withins {
		v := hashes[i].Val()
		opened, _ := v[0].(string)
		if opened == "" {
			continue // delivered meanwhile
		}
		c := CollectionView{Within: w, State: CollectionOpen, Opened: ms(opened), Items: lens[i].Val()}
		if due, _ := v[1].(string); due != "" {
			if t := ms(due); !t.IsZero() && t.UnixMilli() < noDue {
				c.Due = &t
			}
		}
		if done, _ := v[2].(string); done != "" {
			t := ms(done)
			c.State, c.Completed = CollectionCompleted, &t
		}
		out = append(out, c)
	}
	return out, nil
}
