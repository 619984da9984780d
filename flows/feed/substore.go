package feed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/recordstore"
	"github.com/dropstream/dropstream/internal/tenancy"
	"github.com/dropstream/dropstream/notifier/subscriber"
)

// MaxSubscriptions bounds the subscriptions of one subscribable.
const MaxSubscriptions = 100000

// createSubscription adds the subscription unless its destination core is
// taken, and returns the id holding the core.
var createSubscription = redis.NewScript(`
local existing = redis.call('HGET', KEYS[1], ARGV[1])
if existing then return existing end
if redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[4]) then return redis.error_reply('FULL subscribable') end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('SET', KEYS[2], ARGV[3])
redis.call('ZADD', KEYS[3], 0, ARGV[2])
return ARGV[2]`)

// createSubscription stores sub, or returns the subscription already
// holding its core with created false (secret hidden).
func (s *Store) createSubscription(ctx context.Context, sub Subscription) (Subscription, bool, error) {
	stored := sub
	stored.Secret = "" // the notifier keeps it
	if sub.SubscriberID != "" {
		stored.Confirmed = false // the notifier's destination status says
	}
	body, _ := json.Marshal(stored)
	sk := subKey(sub.FeedID, sub.key())
	id, err := createSubscription.Run(ctx, s.rdb, []string{defsKey("unique:" + sk), defsKey("subscription:" + sub.ID),
		defsKey("subscriptions:" + sk)}, sub.Unique, sub.ID, body, MaxSubscriptions).Text()
	if err != nil {
		if strings.Contains(err.Error(), "FULL") {
			return Subscription{}, false, fmt.Errorf("%w: subscribable %s has %d subscriptions", ErrConflict, sub.Subscribable, MaxSubscriptions)
		}
		return Subscription{}, false, fmt.Errorf("feed: create subscription: %w", err)
	}
	if id != sub.ID {
		old, err := s.Subscription(ctx, id)
		return old.Public(), false, err
	}
	return sub, true, nil
}

// existingSubscription returns the subscription of a destination core to
// the subscribable stored under key, if any.
func (s *Store) existingSubscription(ctx context.Context, feedID, key, core string) (Subscription, bool, error) {
	id, err := s.rdb.HGet(ctx, defsKey("unique:"+subKey(feedID, key)), core).Result()
	if errors.Is(err, redis.Nil) {
		return Subscription{}, false, nil
	}
	if err != nil {
		return Subscription{}, false, fmt.Errorf("feed: subscription of %s: %w", key, err)
	}
	sub, err := s.Subscription(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return Subscription{}, false, nil
	}
	return sub, err == nil, err
}

// notifierKey names the notifier destination the flow created for a
// tenant's destination core.
func notifierKey(tenant, core string) string {
	if tag := tenancy.Tag(tenant); tag != "" {
		return defsKey("notifier:" + tag + ":" + subscriber.CoreHash(core))
	}
	return defsKey("notifier:" + subscriber.CoreHash(core))
}

// notifierDestination returns the notifier subscriber and destination ids
// the flow created for a core of tenant ("" when none).
func (s *Store) notifierDestination(ctx context.Context, tenant, core string) (subscriberID, destID string, err error) {
	v, err := s.rdb.Get(ctx, notifierKey(tenant, core)).Result()
	if errors.Is(err, redis.Nil) {
		return "", "", nil
	}
	if err != nil {
		return "", "", fmt.Errorf("feed: notifier destination: %w", err)
	}
	subscriberID, destID, _ = strings.Cut(v, "|")
	return subscriberID, destID, nil
}

func (s *Store) setNotifierDestination(ctx context.Context, tenant, core, subscriberID, destID string) error {
	if err := s.rdb.Set(ctx, notifierKey(tenant, core), subscriberID+"|"+destID, 0).Err(); err != nil {
		return fmt.Errorf("feed: notifier destination: %w", err)
	}
	return nil
}

// Subscription returns one subscription as stored (Confirmed is the
// notifier's to say for e-mail and webhook destinations), or ErrNotFound.
func (s *Store) Subscription(ctx context.Context, id string) (Subscription, error) {
	if !validID(id) {
		return Subscription{}, ErrNotFound
	}
	sub, err := s.subscriptions("").Get(ctx, id)
	return sub, found(err, "subscription "+id)
}

// Subscriptions returns the stored subscriptions of the subscribable
// under key (Flow.Subscriptions adds the notifier's status).
func (s *Store) Subscriptions(ctx context.Context, feedID, key string) ([]Subscription, error) {
	out, err := s.subscriptions(subKey(feedID, key)).All(ctx)
	if out == nil {
		return nil, fmt.Errorf("feed: list subscriptions: %w", err)
	}
	return out, nil
}

// subscriptions is the store of the subscriptions of the subscribable sk
// ("" for Get alone); createSubscription writes them, it only reads.
func (s *Store) subscriptions(sk string) *recordstore.Store[Subscription] {
	st, _ := recordstore.New(s.rdb, recordstore.Config[Subscription]{Layout: recordstore.Layout{Prefix: defsKey("subscription:"),
		Index: defsKey("subscriptions:" + sk)}})
	return st
}

// DeleteSubscription removes a subscription and its uniqueness entry; the
// notifier subscriber stays.
func (s *Store) DeleteSubscription(ctx context.Context, id string) error {
	sub, err := s.Subscription(ctx, id)
	if err != nil {
		return err
	}
	sk := subKey(sub.FeedID, sub.key())
	pipe := s.rdb.TxPipeline()
	pipe.Del(ctx, defsKey("subscription:"+id))
	pipe.ZRem(ctx, defsKey("subscriptions:"+sk), id)
	pipe.HDel(ctx, defsKey("unique:"+sk), sub.Unique)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("feed: delete subscription: %w", err)
	}
	return nil
}

// stamp returns the store's clock in UTC, truncated to the millisecond.
func (s *Store) stamp() time.Time { return s.now().UTC().Truncate(time.Millisecond) }
