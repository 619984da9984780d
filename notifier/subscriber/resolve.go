package subscriber

import (
	"context"
	"encoding/json"
	"fmt"
)

// ResolveMany returns the subscribers with ids (secrets and unsubscribe
// tokens included, for delivery) in one round trip (MGET: every key shares
// the {notifier} slot), by id. Unknown and malformed ids are absent from the
// map; an undecodable record is logged and absent too. The error is a Redis
// error.
func (st *Store) ResolveMany(ctx context.Context, ids []string) (map[string]Subscriber, error) {
	out := make(map[string]Subscriber, len(ids))
	keys := make([]string, 0, len(ids))
	want := make([]string, 0, len(ids))
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if !ValidSubscriberID(id) || seen[id] {
			continue
		}
		seen[id] = true
		keys, want = append(keys, subKey(id)), append(want, id)
	}
	if len(keys) == 0 {
		return out, nil
	}
	vals, err := st.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, fmt.Errorf("subscriber: resolve %d subscribers: %w", len(keys), err)
	}
	for i, v := range vals {
		raw, ok := v.(string)
		if !ok {
			continue
		}
		var s Subscriber
		if err := json.Unmarshal([]byte(raw), &s); err != nil {
			st.cfg.Logger.WarnContext(ctx, "subscriber: skipping undecodable record", "subscriber_id", want[i], "error", err)
			continue
		}
		out[want[i]] = s
	}
	return out, nil
}
