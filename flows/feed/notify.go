package feed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/recordstore"
	"github.com/dropstream/dropstream/internal/tenancy"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/subscriber"
)

// requestItems bounds the items listed in a request's payload, so a
// request stays within notifier.MaxRequestBytes.
const requestItems = 100

// Subscribe subscribes dest to the subscribable under key and returns it
// with created true, or the existing subscription of dest's core with
// created false (secret hidden). A log destination is confirmed at once;
// e-mail and webhook destinations share a notifier destination per tenant
// and core, created pending with the notifier's opt-in. A core held by a
// subscriber the flow did not create, or subscribed concurrently, is
// ErrConflict.
func (f *Flow) Subscribe(ctx context.Context, feedID, key string, dest Destination) (Subscription, bool, error) {
	core, err := dest.Unique()
	if err != nil {
		return Subscription{}, false, err
	}
	fd, err := f.store.Feed(ctx, feedID)
	if err != nil {
		return Subscription{}, false, err
	}
	sb, err := f.store.Subscribable(ctx, feedID, key)
	if err != nil {
		return Subscription{}, false, err
	}
	if old, ok, err := f.store.existingSubscription(ctx, feedID, key, core); err != nil {
		return Subscription{}, false, err
	} else if ok {
		live, _, err := f.resolve(ctx, []Subscription{old})
		if err != nil || len(live) == 1 {
			if len(live) == 1 {
				old = live[0]
			}
			return old.Public(), false, err
		}
		// Its notifier destination is gone: subscribe afresh.
		if err := f.store.DeleteSubscription(ctx, old.ID); err != nil && !errors.Is(err, ErrNotFound) {
			return Subscription{}, false, err
		}
	}
	sub := Subscription{ID: randomHex(12), FeedID: feedID, Subscribable: sb.Name, Tenant: sb.Tenant, Destination: dest, Unique: core,
		Added: f.store.stamp()}
	nd, who, ok := dest.notifierDestination()
	if !ok {
		sub.Confirmed = true
		return f.store.createSubscription(ctx, sub)
	}
	if sub.SubscriberID, sub.DestinationID, sub.Secret, sub.Confirmed, err = f.notifierSubscriber(ctx, fd, sb, nd, who); err != nil {
		return Subscription{}, false, err
	}
	out, created, err := f.store.createSubscription(ctx, sub)
	if err == nil && !created {
		if live, _, rerr := f.resolve(ctx, []Subscription{out}); rerr == nil && len(live) == 1 {
			out = live[0]
		}
	}
	return out, created, err
}

// notifierSubscriber returns the notifier subscriber and destination of
// d's core for sb's tenant, creating them pending when new.
func (f *Flow) notifierSubscriber(ctx context.Context, fd Feed, sb Subscribable, d subscriber.Destination, who string) (sid, did, secret string, active bool, err error) {
	core, err := d.Core()
	if err != nil {
		return "", "", "", false, fmt.Errorf("%w destination: %w", ErrInvalid, err)
	}
	if v, err := f.rdb.Get(ctx, notifierKey(sb.Tenant, core)).Result(); err == nil {
		sid, did, _ = strings.Cut(v, "|") // the one the flow created for this tenant's core
	} else if !errors.Is(err, redis.Nil) {
		return "", "", "", false, fmt.Errorf("feed: notifier destination: %w", err)
	}
	if sid != "" {
		s, err := f.deps.Subscribers.Resolve(ctx, sid)
		if err == nil {
			if x, ok := s.Destination(did); ok {
				return sid, did, "", x.Status == subscriber.StatusActive, nil
			}
		} else if !errors.Is(err, subscriber.ErrNotFound) {
			return "", "", "", false, fmt.Errorf("feed: notifier subscriber: %w", err)
		}
		// Unsubscribed, or expired unconfirmed: subscribe afresh.
	}
	created, err := f.deps.Subscribers.Create(ctx, subscriber.Subscriber{Name: who, Tenant: sb.Tenant, Destinations: []subscriber.Destination{d}})
	switch {
	case errors.Is(err, subscriber.ErrInvalid):
		return "", "", "", false, fmt.Errorf("%w destination: %w", ErrInvalid, err)
	case errors.Is(err, subscriber.ErrDuplicate):
		return "", "", "", false, fmt.Errorf("%w: the destination is a notifier subscriber the feed flow did not create, or is being subscribed right now: %w", ErrConflict, err)
	case errors.Is(err, subscriber.ErrTooMany):
		return "", "", "", false, fmt.Errorf("%w: %w", ErrConflict, err)
	case err != nil:
		return "", "", "", false, fmt.Errorf("feed: notifier subscriber: %w", err)
	}
	s := created.Subscriber
	x := s.Destinations[0]
	req, err := f.confirmRequest(fd, sb.Name, s.ID, x, created.ConfirmTokens[x.ID])
	if err == nil {
		err = f.deps.Notify(ctx, req)
	}
	if err == nil {
		err = f.rdb.Set(ctx, notifierKey(sb.Tenant, core), s.ID+"|"+x.ID, 0).Err()
	}
	if err != nil {
		// Nobody could confirm it: remove it, so subscribing again starts
		// afresh.
		if derr := f.deps.Subscribers.Delete(context.WithoutCancel(ctx), s.ID); derr != nil {
			f.log.WarnContext(ctx, "feed: removing an unconfirmable notifier subscriber failed; it expires unconfirmed",
				"subscriber_id", s.ID, "error", derr)
		}
		return "", "", "", false, fmt.Errorf("feed: ask for confirmation: %w", err)
	}
	return s.ID, x.ID, x.Secret, false, nil
}

// Subscriptions returns the live subscriptions of the subscribable stored
// under key, confirmed as the notifier says.
func (f *Flow) Subscriptions(ctx context.Context, feedID, key string) ([]Subscription, error) {
	subs, err := f.store.Subscriptions(ctx, feedID, key)
	if err != nil {
		return nil, err
	}
	live, _, err := f.resolve(ctx, subs)
	return live, err
}

// resolveChunk bounds the subscribers resolved in one round trip.
const resolveChunk = 1000

// resolve splits subs into those alive, Confirmed as their notifier
// destination says, and those whose notifier destination is gone.
func (f *Flow) resolve(ctx context.Context, subs []Subscription) (live, gone []Subscription, err error) {
	var ids []string
	for _, s := range subs {
		if s.SubscriberID != "" {
			ids = append(ids, s.SubscriberID)
		}
	}
	found := make(map[string]subscriber.Subscriber, len(ids))
	for start := 0; start < len(ids); start += resolveChunk {
		m, err := f.deps.Subscribers.ResolveMany(ctx, ids[start:min(start+resolveChunk, len(ids))])
		if err != nil {
			return nil, nil, fmt.Errorf("feed: notifier subscribers: %w", err)
		}
		maps.Copy(found, m)
	}
	for _, s := range subs {
		if s.Destination.Kind == DestLog {
			s.Confirmed = true
			live = append(live, s)
			continue
		}
		ns, ok := found[s.SubscriberID]
		d, dok := ns.Destination(s.DestinationID)
		if !ok || !dok {
			gone = append(gone, s)
			continue
		}
		s.Confirmed = d.Status == subscriber.StatusActive
		live = append(live, s)
	}
	return live, gone, nil
}

// subject is the notifier subject of a subscribable's messages; a
// subscriber's include/exclude preferences match it.
func subject(feedID, name string) string { return "feed:" + feedID + "/" + name }

// payload is the request's JSON: the message with at most requestItems
// items, and its HTML when it fits half of notifier.MaxRequestBytes.
func payload(msg Message) json.RawMessage {
	compact := msg
	compact.Text = ""
	compact.Items = nil
	for i, it := range msg.Items {
		if i == requestItems {
			break
		}
		it.Description = ""
		compact.Items = append(compact.Items, it)
	}
	for _, drop := range []func(*Message){func(*Message) {}, func(m *Message) { m.HTML = "" }, func(m *Message) { m.Items = nil }} {
		drop(&compact)
		if b, _ := json.Marshal(compact); len(b) <= notifier.MaxRequestBytes/2 {
			return b
		}
	}
	b, _ := json.Marshal(Message{Kind: msg.Kind, FeedID: msg.FeedID, Subscribable: msg.Subscribable, Collection: msg.Collection})
	return b
}

// confirmRequest is the confirmation request of a new, pending notifier
// destination, sent to it inline.
func (f *Flow) confirmRequest(fd Feed, name, subscriberID string, d subscriber.Destination, token string) (notifier.Request, error) {
	msg, err := renderConfirm(fd, name, f.cfg.PublicURL+notifier.ConfirmPath+token)
	if err != nil {
		return notifier.Request{}, err
	}
	body, _ := json.Marshal(Message{Kind: msg.Kind, FeedID: fd.ID, FeedURL: fd.URL, Subscribable: name, Subject: msg.Subject})
	return notifier.Request{Flow: Name, Event: "feed.confirm", Subject: clip(subject(fd.ID, name), notifier.MaxSubjectLen),
		SubscriberID: subscriberID, Destination: &d, Window: "confirm:" + d.ID, Critical: true, Title: msg.Subject,
		Text: msg.Text, HTML: msg.HTMLBody, Payload: body}, nil
}

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
