package comic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/subscriber"
	"github.com/dropstream/dropstream/stream"
)

// StageDelivery is the name of the delivery stage.
const StageDelivery = "comic-delivery"

// Deliverer sends one notification once per business key;
// *notifier.Dispatcher is one.
type Deliverer interface {
	Deliver(ctx context.Context, del notifier.Delivery) (string, error)
}

// DeliveryConfig configures the delivery stage.
type DeliveryConfig struct {
	// NotifyURL is the flow's POST /notify destination, used for
	// subscriptions without their own. Empty: such notifications go to the
	// log channel.
	NotifyURL string
	// NotifySecret signs requests to NotifyURL (HMAC, see notifier.Sign).
	// Required with NotifyURL.
	NotifySecret string
	// Relay, when set, hands every notification that has a destination
	// (the flow's NotifyURL or the subscriber's own) to the notifier's
	// generic request path instead of sending it here: a
	// notifier.Request with an inline comic_notify destination, window
	// "<comic id>:<gen>:<email hash>", so the notifier delivers it once,
	// throttled, retried and recorded in its history. Set it to
	// notifier.PublishRequests over notifier.RequestTopic. Notifications
	// without a destination still go to the log channel here.
	Relay func(ctx context.Context, r notifier.Request) error
}

// ChannelNotifier is the history's channel of a notification handed to the
// notifier's request path.
const ChannelNotifier = "notifier"

// relayRequest is the notifier request of a pending notification.
func relayRequest(ctx context.Context, r Request, to notifier.Recipient) notifier.Request {
	return notifier.Request{Flow: Flow, Event: EventComicListed, Subject: r.ComicID,
		Destination: &subscriber.Destination{Kind: subscriber.KindComic, Address: to.Address, Secret: to.Secret, Status: subscriber.StatusActive},
		Window:      r.ComicID + ":" + strconv.FormatInt(r.Gen, 10) + ":" + hashHex([]byte(r.Email)),
		Critical:    true, Title: "A comic you watch is for sale", Text: r.Email + ": comic " + r.ComicID + " is listed",
		Payload: r.Payload, ObservedAt: time.UnixMilli(r.ListedAtMs), TraceID: traceIDOf(ctx), EventID: r.BusinessKey}
}

// Validate checks the config.
func (c DeliveryConfig) Validate() error {
	if c.NotifyURL == "" {
		return nil
	}
	if err := ValidateNotifyURL(c.NotifyURL); err != nil {
		return err
	}
	if len(c.NotifySecret) < 16 {
		return errors.New("comic: notify secret of at least 16 bytes required with a notify URL")
	}
	return nil
}

// Delivery is the stage that delivers pending notifications: once per
// (email, comic) through the Deliverer's ledger, then recorded in the
// comic's notification history, which keeps later jobs of the same comic
// from notifying the same person again.
//
//	ds:{comic.p}:comic:pending:<id>    hash: email → Request, handed off not yet delivered
//	ds:{comic.p}:comic:notified:<id>   hash: email → Notified, the history
type Delivery struct {
	rdb    redis.UniversalClient
	topics Topics
	store  *Store
	d      Deliverer
	cfg    DeliveryConfig
	now    func() time.Time
}

// Notified is one entry of a comic's notification history.
type Notified struct {
	SubscriptionID string `json:"subscription_id"`
	Gen            int64  `json:"gen"`
	AtMs           int64  `json:"at_ms"`
	Channel        string `json:"channel"`
}

// NewDelivery returns the delivery stage's handler.
func NewDelivery(rdb redis.UniversalClient, topics Topics, store *Store, d Deliverer, cfg DeliveryConfig) (*Delivery, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d == nil || store == nil {
		return nil, errors.New("comic: delivery needs a deliverer and a store")
	}
	return &Delivery{rdb: rdb, topics: topics, store: store, d: d, cfg: cfg, now: time.Now}, nil
}

// Stage returns the delivery stage over the notify topic.
func (d *Delivery) Stage() stream.Stage {
	return stream.Stage{Name: StageDelivery, Topic: d.topics.Notify, Handler: d.handle}
}

// recordScript: KEYS notified, pending, events stream; ARGV email,
// history entry, event payload, comic id.
var recordScript = redis.NewScript(`
local first = redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2])
redis.call('HDEL', KEYS[2], ARGV[1])
if first == 1 then
  redis.call('XADD', KEYS[3], '*', 'key', ARGV[4], 'type', 'comic.event', 'payload', ARGV[3])
end
return first`)

func (d *Delivery) handle(ctx context.Context, m *stream.Message) error {
	var r Request
	if err := json.Unmarshal(m.Payload, &r); err != nil || r.ComicID == "" || r.Email == "" || r.BusinessKey == "" {
		return stream.Permanentf("comic: invalid notification request: %v", err)
	}
	tag := d.topics.tag(r.ComicID)
	seen, err := d.rdb.HExists(ctx, notifiedKey(tag, r.ComicID), r.Email).Result()
	if err != nil {
		return fmt.Errorf("comic: history: %w", err)
	}
	if seen {
		return d.forget(ctx, tag, r) // notified already: never twice
	}
	sub, err := d.store.Get(ctx, r.SubscriptionID)
	if errors.Is(err, ErrNotFound) {
		// Unsubscribed since the match: nothing to send.
		if err := d.forget(ctx, tag, r); err != nil {
			return err
		}
		return fmt.Errorf("comic: subscription %s deleted before delivery: %w", r.SubscriptionID, stream.ErrDrop)
	}
	if err != nil {
		return err
	}
	channel, recipient := notifier.ChannelWebhook, notifier.Recipient{ID: sub.ID, Address: sub.NotifyURL, Secret: sub.Secret}
	if sub.NotifyURL == "" {
		recipient.Address, recipient.Secret = d.cfg.NotifyURL, d.cfg.NotifySecret
		if d.cfg.NotifyURL == "" {
			channel = notifier.ChannelLog
		}
	}
	if d.cfg.Relay != nil && channel == notifier.ChannelWebhook {
		channel = ChannelNotifier
		if err := d.cfg.Relay(ctx, relayRequest(ctx, r, recipient)); err != nil {
			return fmt.Errorf("comic: relay to the notifier: %w", err)
		}
	} else {
		n := notifier.Notification{Flow: Flow, Event: EventComicListed, Recipient: recipient, EventID: r.BusinessKey,
			Subject: r.ComicID, TraceID: traceIDOf(ctx), ObservedAt: time.UnixMilli(r.ListedAtMs), Body: r.Payload}
		if _, err := d.d.Deliver(ctx, notifier.Delivery{HashTag: tag, Key: r.BusinessKey, Channel: channel,
			MessageID: m.ID, Attempt: m.Attempt, Notification: n}); err != nil {
			return err
		}
	}
	// Sent now or before (a redelivery after the send): record the history.
	hist, _ := json.Marshal(Notified{SubscriptionID: sub.ID, Gen: r.Gen, AtMs: d.now().UnixMilli(), Channel: channel})
	ev, _ := json.Marshal(Event{Kind: EventNotified, ComicID: r.ComicID, Gen: r.Gen, AtMs: d.now().UnixMilli(),
		Email: r.Email, SubscriptionID: sub.ID, TraceID: traceIDOf(ctx)})
	err = recordScript.Run(ctx, d.rdb, []string{notifiedKey(tag, r.ComicID), pendingKey(tag, r.ComicID), eventsStream(d.topics, r.ComicID)},
		r.Email, hist, ev, r.ComicID).Err()
	if err != nil {
		return fmt.Errorf("comic: record notification: %w", err)
	}
	return nil
}

// DiscardStage returns a stage in consumer group group that acknowledges
// notification requests without delivering them and drops them from their
// comic's pending notifications; it records no history. It is the null
// delivery of benchmarks that measure matching alone: with it, the notify
// streams are acknowledged and can be trimmed.
func (d *Delivery) DiscardStage(group string) stream.Stage {
	return stream.Stage{Name: group, Topic: d.topics.Notify, BatchHandler: func(ctx context.Context, msgs []*stream.Message) error {
		pipe := d.rdb.Pipeline()
		for _, m := range msgs {
			var r Request
			if json.Unmarshal(m.Payload, &r) == nil && r.ComicID != "" && r.Email != "" {
				pipe.HDel(ctx, pendingKey(d.topics.tag(r.ComicID), r.ComicID), r.Email)
			}
		}
		if pipe.Len() == 0 {
			return nil
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("comic: discard pending: %w", err)
		}
		return nil
	}}
}

// forget drops a pending request that needs no delivery.
func (d *Delivery) forget(ctx context.Context, tag string, r Request) error {
	if err := d.rdb.HDel(ctx, pendingKey(tag, r.ComicID), r.Email).Err(); err != nil {
		return fmt.Errorf("comic: pending: %w", err)
	}
	return nil
}

// History returns a comic's notification history, email → entry.
func (d *Delivery) History(ctx context.Context, comicID string) (map[string]Notified, error) {
	raw, err := d.rdb.HGetAll(ctx, notifiedKey(d.topics.tag(comicID), comicID)).Result()
	if err != nil {
		return nil, fmt.Errorf("comic: history %s: %w", comicID, err)
	}
	out := make(map[string]Notified, len(raw))
	for email, v := range raw {
		var n Notified
		if err := json.Unmarshal([]byte(v), &n); err != nil {
			return nil, fmt.Errorf("comic: decode history of %s: %w", comicID, err)
		}
		out[email] = n
	}
	return out, nil
}
