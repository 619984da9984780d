package feed

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
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

func ms(s string) time.Time {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(n).UTC()
}
