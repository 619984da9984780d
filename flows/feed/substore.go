package feed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// MaxSubscriptions bounds the subscriptions of one subscribable.
const MaxSubscriptions = 100000

// createSubscription adds the subscription unless its destination core is
// taken for the subscribable, atomically; it returns the id that holds the
// core (the new one, or the existing one).
var createSubscription = redis.NewScript(`
local existing = redis.call('HGET', KEYS[1], ARGV[1])
if existing then return existing end
if redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[4]) then return redis.error_reply('FULL subscribable') end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('SET', KEYS[2], ARGV[3])
redis.call('ZADD', KEYS[3], 0, ARGV[2])
redis.call('SET', KEYS[4], 'confirm:' .. ARGV[2])
redis.call('SET', KEYS[5], 'unsubscribe:' .. ARGV[2])
return ARGV[2]`)

// CreateSubscription subscribes dest to a subscribable, unconfirmed. When
// a subscription with the same destination core exists it is returned with
// created false (its secret hidden).
func (s *Store) CreateSubscription(ctx context.Context, feedID, name string, dest Destination) (Subscription, bool, error) {
	core, err := dest.Unique()
	if err != nil {
		return Subscription{}, false, err
	}
	if _, err := s.Subscribable(ctx, feedID, name); err != nil {
		return Subscription{}, false, err
	}
	sub := Subscription{ID: randomHex(12), FeedID: feedID, Subscribable: name, Destination: dest, Unique: core,
		Added: s.now().UTC().Truncate(time.Millisecond), ConfirmToken: randomHex(16), UnsubscribeToken: randomHex(16)}
	if dest.Kind == DestWebhook {
		sub.Secret = "whsec_" + randomHex(32)
	}
	body, _ := json.Marshal(sub)
	sk := subKey(feedID, name)
	id, err := createSubscription.Run(ctx, s.rdb, []string{defsKey("unique:" + sk), defsKey("subscription:" + sub.ID),
		defsKey("subscriptions:" + sk), defsKey("token:" + sub.ConfirmToken), defsKey("token:" + sub.UnsubscribeToken)},
		core, sub.ID, body, MaxSubscriptions).Text()
	if err != nil {
		if strings.Contains(err.Error(), "FULL") {
			return Subscription{}, false, fmt.Errorf("%w: subscribable %s has %d subscriptions", ErrConflict, name, MaxSubscriptions)
		}
		return Subscription{}, false, fmt.Errorf("feed: create subscription: %w", err)
	}
	if id != sub.ID {
		old, err := s.Subscription(ctx, id)
		return old.public(), false, err
	}
	return sub, true, nil
}

// Subscription returns one subscription, secret and tokens included, or
// ErrNotFound.
func (s *Store) Subscription(ctx context.Context, id string) (Subscription, error) {
	if !validID(id) {
		return Subscription{}, ErrNotFound
	}
	raw, err := s.rdb.Get(ctx, defsKey("subscription:"+id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return Subscription{}, ErrNotFound
	}
	if err != nil {
		return Subscription{}, fmt.Errorf("feed: get subscription: %w", err)
	}
	var sub Subscription
	if err := json.Unmarshal(raw, &sub); err != nil {
		return Subscription{}, fmt.Errorf("feed: decode subscription: %w", err)
	}
	return sub, nil
}

// Subscriptions returns the subscriptions of a subscribable (only the
// confirmed ones when confirmedOnly), secrets and tokens included.
func (s *Store) Subscriptions(ctx context.Context, feedID, name string, confirmedOnly bool) ([]Subscription, error) {
	ids, err := s.rdb.ZRange(ctx, defsKey("subscriptions:"+subKey(feedID, name)), 0, MaxSubscriptions-1).Result()
	if err != nil {
		return nil, fmt.Errorf("feed: list subscriptions: %w", err)
	}
	var out []Subscription
	for start := 0; start < len(ids); start += 500 {
		chunk := ids[start:min(start+500, len(ids))]
		keys := make([]string, len(chunk))
		for i, id := range chunk {
			keys[i] = defsKey("subscription:" + id)
		}
		vals, err := s.rdb.MGet(ctx, keys...).Result()
		if err != nil {
			return nil, fmt.Errorf("feed: load subscriptions: %w", err)
		}
		for _, v := range vals {
			raw, ok := v.(string)
			if !ok {
				continue
			}
			var sub Subscription
			if json.Unmarshal([]byte(raw), &sub) == nil && (sub.Confirmed || !confirmedOnly) {
				out = append(out, sub)
			}
		}
	}
	return out, nil
}

// Confirm confirms the subscription of a confirmation token.
func (s *Store) Confirm(ctx context.Context, token string) (Subscription, error) {
	sub, err := s.byToken(ctx, token, "confirm:")
	if err != nil {
		return Subscription{}, err
	}
	if sub.Confirmed {
		return sub, nil
	}
	sub.Confirmed = true
	body, _ := json.Marshal(sub)
	// XX: a subscription removed meanwhile stays removed.
	if err := s.rdb.SetArgs(ctx, defsKey("subscription:"+sub.ID), body, redis.SetArgs{Mode: "XX"}).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return Subscription{}, fmt.Errorf("feed: confirm: %w", err)
	}
	return sub, nil
}

// Unsubscribe removes the subscription of an unsubscribe token.
func (s *Store) Unsubscribe(ctx context.Context, token string) (Subscription, error) {
	sub, err := s.byToken(ctx, token, "unsubscribe:")
	if err != nil {
		return Subscription{}, err
	}
	return sub, s.DeleteSubscription(ctx, sub.ID)
}

func (s *Store) byToken(ctx context.Context, token, prefix string) (Subscription, error) {
	if !validID(token) {
		return Subscription{}, ErrNotFound
	}
	v, err := s.rdb.Get(ctx, defsKey("token:"+token)).Result()
	if errors.Is(err, redis.Nil) {
		return Subscription{}, ErrNotFound
	}
	if err != nil {
		return Subscription{}, fmt.Errorf("feed: token: %w", err)
	}
	id, ok := strings.CutPrefix(v, prefix)
	if !ok {
		return Subscription{}, ErrNotFound
	}
	return s.Subscription(ctx, id)
}

// DeleteSubscription removes a subscription, its uniqueness entry and its
// tokens.
func (s *Store) DeleteSubscription(ctx context.Context, id string) error {
	sub, err := s.Subscription(ctx, id)
	if err != nil {
		return err
	}
	sk := subKey(sub.FeedID, sub.Subscribable)
	pipe := s.rdb.TxPipeline()
	pipe.Del(ctx, defsKey("subscription:"+id), defsKey("token:"+sub.ConfirmToken), defsKey("token:"+sub.UnsubscribeToken))
	pipe.ZRem(ctx, defsKey("subscriptions:"+sk), id)
	pipe.HDel(ctx, defsKey("unique:"+sk), sub.Unique)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("feed: delete subscription: %w", err)
	}
	return nil
}
