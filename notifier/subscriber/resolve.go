package subscriber

import (
	"context"
	"encoding/json"
	"fmt"
)

// ResolveMany returns the subscribers of ids by id, secrets included, in
// one MGET. Unknown ids and undecodable records (logged) are absent.
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
// and undecodable ones. op names the caller in errors.
func (st *Store) load(ctx context.Context, op string, ids []string) ([]Subscriber, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = subKey(id)
	}
	vals, err := st.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, fmt.Errorf("subscriber: %s %d subscribers: %w", op, len(keys), err)
	}
	out := make([]Subscriber, 0, len(ids))
	for i, v := range vals {
		raw, ok := v.(string)
		if !ok {
			continue
		}
		var s Subscriber
		if err := json.Unmarshal([]byte(raw), &s); err != nil || s.ID != ids[i] {
			st.cfg.Logger.WarnContext(ctx, "subscriber: skipping undecodable record", "subscriber_id", ids[i], "error", err)
			continue
		}
		out = append(out, s)
	}
	return out, nil
}
