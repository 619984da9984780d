package subscriber

import (
	"context"
	"encoding/json"
	"fmt"

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
	for i, id := range ids {
		if d, ok := st.decoded.Peek(id); ok {
			keys[i] = d.key
		} else {
			keys[i] = subKey(id)
		}
	}
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
		if d, ok := st.decoded.Get(ids[i]); ok && d.raw == raw {
			out = append(out, d.sub)
			continue
		}
		var s Subscriber
		if err := json.Unmarshal([]byte(raw), &s); err != nil || s.ID != ids[i] {
			st.cfg.Logger.WarnContext(ctx, "subscriber: skipping undecodable record", "subscriber_id", ids[i], "error", err)
			continue
		}
		st.decoded.Add(ids[i], decoded{key: keys[i], raw: raw, sub: s})
		out = append(out, s)
	}
	return out, nil
}

// maxDecoded bounds the decoded records a store keeps.
const maxDecoded = 8192

// decoded is a subscriber's latest decoded record with its JSON, so an
// unchanged record is not decoded again, and its key, boxed.
type decoded struct {
	key any // subKey(id)
	raw string
	sub Subscriber
}
