package subscriber

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
)

// ResolveMany returns the subscribers of ids by id, secrets included, in
// one MGET. Unknown ids and undecodable records (logged) are absent. The
// subscribers share their slices, maps and pointers with other calls'
// (a record read before is decoded once): callers must not change them.
func (st *Store) ResolveMany(ctx context.Context, ids []string) (map[string]Subscriber, error) {
	want := make([]string, 0, len(ids))
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if ValidSubscriberID(id) && !seen[id] {
			seen[id] = true
			want = append(want, id)
		}
	}
	subs, err := st.load(ctx, "resolve", want)
	if err != nil {
		return nil, err
	}
	out := make(map[string]Subscriber, len(subs))
	for _, s := range subs {
		out[s.ID] = s
	}
	return out, nil
}

// load reads the subscribers of ids in order in one MGET, skipping missing
// and undecodable ones; a record unchanged since it was last read is not
// decoded again. op names the caller in errors.
func (st *Store) load(ctx context.Context, op string, ids []string) ([]Subscriber, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	args := make([]any, 1+len(ids))
	args[0] = "mget"
	keys := args[1:]
	st.decoded.keys(ids, keys)
	cmd := redis.NewSliceCmd(ctx, args...)
	_ = st.rdb.Process(ctx, cmd)
	vals, err := cmd.Result()
	if err != nil {
		return nil, fmt.Errorf("subscriber: %s %d subscribers: %w", op, len(ids), err)
	}
	out := make([]Subscriber, 0, len(ids))
	for i, v := range vals {
		raw, ok := v.(string)
		if !ok {
			continue
		}
		if s, ok := st.decoded.get(ids[i], raw); ok {
			out = append(out, s)
			continue
		}
		var s Subscriber
		if err := json.Unmarshal([]byte(raw), &s); err != nil || s.ID != ids[i] {
			st.cfg.Logger.WarnContext(ctx, "subscriber: skipping undecodable record", "subscriber_id", ids[i], "error", err)
			continue
		}
		st.decoded.put(ids[i], keys[i], raw, s)
		out = append(out, s)
	}
	return out, nil
}

// maxDecoded bounds a decodeCache; a full one starts afresh.
const maxDecoded = 8192

// decodeCache keeps the latest decoded record of each subscriber with its
// JSON, so an unchanged record is not decoded again, and its key, boxed.
type decodeCache struct {
	mu   sync.Mutex
	subs map[string]decoded
}

type decoded struct {
	key any // subKey(id)
	raw string
	sub Subscriber
}

// keys sets keys[i] to the key of ids[i].
func (c *decodeCache) keys(ids []string, keys []any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, id := range ids {
		if d, ok := c.subs[id]; ok {
			keys[i] = d.key
		} else {
			keys[i] = subKey(id)
		}
	}
}

// get returns the subscriber decoded from raw, when cached.
func (c *decodeCache) get(id, raw string) (Subscriber, bool) {
	c.mu.Lock()
	d, ok := c.subs[id]
	c.mu.Unlock()
	if !ok || d.raw != raw {
		return Subscriber{}, false
	}
	return d.sub, true
}

// put caches s, decoded from raw, and its key.
func (c *decodeCache) put(id string, key any, raw string, s Subscriber) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.subs == nil || len(c.subs) >= maxDecoded {
		c.subs = make(map[string]decoded)
	}
	c.subs[id] = decoded{key: key, raw: raw, sub: s}
}
