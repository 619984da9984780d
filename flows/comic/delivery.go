package comic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/internal/settings"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/subscriber"
	"github.com/dropstream/dropstream/stream"
)

// StageDelivery is the name of the delivery stage.
const StageDelivery = "comic-delivery"

// Deliverer sends notifications once per business key (*notifier.Dispatcher).
type Deliverer interface {
	DeliverBatch(ctx context.Context, dels []notifier.Delivery, opts notifier.BatchOptions) ([]string, []error)
}

// DeliveryConfig configures the delivery stage.
type DeliveryConfig struct {
	// NotifyURL is the destination of subscriptions without their own;
	// "": the log channel.
	NotifyURL    string
	NotifySecret string // signs requests to NotifyURL; required with it
	// Relay, when set, hands webhook notifications to the notifier as
	// KindNotify requests (New sets the notifier's Notify).
	Relay func(ctx context.Context, reqs ...notifier.Request) error
	// Concurrency bounds one message's notifications sent at once when
	// not relayed. Default 8.
	Concurrency int `default:"8" range:"0.."`
}

// ChannelNotifier is the history's channel of a relayed notification.
const ChannelNotifier = "notifier"

// Validate checks the config.
func (c DeliveryConfig) Validate() error {
	if err := settings.Check("comic: delivery", &c); err != nil || c.NotifyURL == "" {
		return err
	}
	if err := ValidateNotifyURL(c.NotifyURL); err != nil {
		return err
	}
	if len(c.NotifySecret) < 16 {
		return errors.New("comic: notify secret of at least 16 bytes required with a notify URL")
	}
	return nil
}

// Delivery delivers pending notifications once per (comic, email) and
// records the history in one script. A message with failed deliveries is
// retried.
type Delivery struct {
	rdb    redis.UniversalClient
	topics Topics
	store  *Store
	d      Deliverer
	cfg    DeliveryConfig
	now    func() time.Time
}

// Stage returns the delivery stage over the notify topic.
func (d *Delivery) Stage() stream.Stage {
	return stream.Stage{Name: StageDelivery, Topic: d.topics.Notify, Handler: d.handle}
}

// businessKey makes one delivery per (comic, email).
func businessKey(id, email string) string {
	return "comic:" + id + ":" + hashHex([]byte(email))
}

// target is one notification to deliver.
type target struct {
	sub     Subscription
	channel string
	to      notifier.Recipient
	payload []byte
	key     string
	sentErr error
}

func (d *Delivery) handle(ctx context.Context, m *stream.Message) error {
	var r Request
	if err := json.Unmarshal(m.Payload, &r); err != nil || r.ComicID == "" || r.Gen < 1 ||
		len(r.SubscriptionIDs) == 0 || len(r.SubscriptionIDs) > MaxRequestBatch {
		return stream.Permanentf("comic: invalid notification request: %v", err)
	}
	tag := d.topics.tag(r.ComicID)
	targets, err := d.targets(ctx, tag, r)
	if err != nil {
		return err
	}
	d.send(ctx, m, tag, r, targets)
	// Every subscription but the failed ones leaves the pending set.
	failed := map[string]bool{}
	for _, t := range targets {
		if t.sentErr != nil && !stream.IsPermanent(t.sentErr) {
			failed[t.sub.ID] = true
		}
	}
	if err := d.record(ctx, tag, r, targets, failed); err != nil {
		return err
	}
	for _, t := range targets {
		if failed[t.sub.ID] {
			return fmt.Errorf("comic: deliver %s to subscription %s: %w", r.ComicID, t.sub.ID, t.sentErr)
		}
	}
	return nil
}

// targets returns one target per email of r not yet in the history.
func (d *Delivery) targets(ctx context.Context, tag string, r Request) ([]*target, error) {
	subs, err := d.store.subs.GetMany(ctx, r.SubscriptionIDs)
	if err != nil {
		return nil, fmt.Errorf("comic: load subscriptions: %w", err)
	}
	emails := make([]string, len(subs))
	for i, s := range subs {
		emails[i] = s.Email
	}
	var seen []any
	if len(emails) > 0 {
		if seen, err = d.rdb.HMGet(ctx, notifiedKey(tag, r.ComicID), emails...).Result(); err != nil {
			return nil, fmt.Errorf("comic: history: %w", err)
		}
	}
	hold, err := d.rdb.HMGet(ctx, holdKey(tag, r.ComicID), "gen", "salt", "window").Result()
	if err != nil {
		return nil, fmt.Errorf("comic: hold: %w", err)
	}
	salt, window := "", int64(0)
	if r.Wave > 0 && str(hold[0]) == strconv.FormatInt(r.Gen, 10) {
		salt = str(hold[1])
		window, _ = strconv.ParseInt(str(hold[2]), 10, 64)
	}
	out := make([]*target, 0, len(subs))
	byEmail := map[string]bool{}
	for i, s := range subs {
		if seen[i] != nil || byEmail[s.Email] {
			continue // notified already: never twice
		}
		byEmail[s.Email] = true
		t := &target{sub: s, channel: notifier.ChannelWebhook, key: businessKey(r.ComicID, s.Email),
			to: notifier.Recipient{ID: s.ID, Address: s.NotifyURL, Secret: s.Secret}}
		if s.NotifyURL == "" {
			t.to.Address, t.to.Secret = d.cfg.NotifyURL, d.cfg.NotifySecret
			if d.cfg.NotifyURL == "" {
				t.channel = notifier.ChannelLog
			}
		}
		if d.cfg.Relay != nil && t.channel == notifier.ChannelWebhook {
			t.channel = ChannelNotifier
		}
		body := NotifyBody{Event: EventComicListed, ComicID: r.ComicID, Comic: r.Comic, Email: s.Email, SubscriptionID: s.ID}
		if salt != "" {
			body.HoldToken, body.HoldSeconds = HoldToken(salt, s.ID), window/1000
		}
		t.payload, _ = json.Marshal(body)
		out = append(out, t)
	}
	return out, nil
}

// send relays or delivers every target and sets its sentErr.
func (d *Delivery) send(ctx context.Context, m *stream.Message, tag string, r Request, targets []*target) {
	var relayed []notifier.Request
	var relayTo []*target
	var dels []notifier.Delivery
	var delTo []*target
	for _, t := range targets {
		if t.channel == ChannelNotifier {
			relayed = append(relayed, notifier.Request{Flow: Name, Event: EventComicListed, Subject: r.ComicID,
				Destination: &subscriber.Destination{Kind: KindNotify, Address: t.to.Address, Secret: t.to.Secret, Status: subscriber.StatusActive},
				Window:      r.ComicID + ":" + strconv.FormatInt(r.Gen, 10) + ":" + strconv.Itoa(r.Wave) + ":" + hashHex([]byte(t.sub.Email)),
				Critical:    true, Title: "A comic you watch is for sale", Text: t.sub.Email + ": comic " + r.ComicID + " is listed",
				Payload: t.payload, ObservedAt: time.UnixMilli(r.ListedAtMs), TraceID: flow.TraceIDFrom(ctx), EventID: t.key})
			relayTo = append(relayTo, t)
			continue
		}
		dels = append(dels, notifier.Delivery{HashTag: tag, Key: t.key, Channel: t.channel, MessageID: m.ID, Attempt: m.Attempt,
			Notification: notifier.Notification{Flow: Name, Event: EventComicListed, Recipient: t.to, EventID: t.key,
				Subject: r.ComicID, TraceID: flow.TraceIDFrom(ctx), ObservedAt: time.UnixMilli(r.ListedAtMs), Body: t.payload}})
		delTo = append(delTo, t)
	}
	if len(relayed) > 0 {
		if err := d.cfg.Relay(ctx, relayed...); err != nil {
			for _, t := range relayTo {
				t.sentErr = fmt.Errorf("comic: relay to the notifier: %w", err)
			}
		}
	}
	if len(dels) > 0 {
		_, errs := d.d.DeliverBatch(ctx, dels, notifier.BatchOptions{Concurrency: d.cfg.Concurrency})
		for i, err := range errs {
			delTo[i].sentErr = err
		}
	}
}

// recordScript records the delivered notifications' history, drops the
// settled subscriptions from the pending set and extends the wave's hold
// from the send time (extendLua). KEYS notified, pending, events stream,
// hold, holds zset; ARGV comic id, n, gen, wave, send ms, n triples
// (email, history entry, event), then the settled subscription ids.
// Returns the entries recorded now.
var recordScript = redis.NewScript(extendLua + `
local n = tonumber(ARGV[2])
local first = 0
for i = 0, n - 1 do
  local b = 6 + 3 * i
  if redis.call('HSETNX', KEYS[1], ARGV[b], ARGV[b + 1]) == 1 then
    redis.call('XADD', KEYS[3], '*', 'key', ARGV[1], 'type', 'comic.event', 'payload', ARGV[b + 2])
    first = first + 1
  end
end
for i = 6 + 3 * n, #ARGV do redis.call('SREM', KEYS[2], ARGV[i]) end
if n > 0 then extend(KEYS[4], KEYS[5], ARGV[1], ARGV[3], ARGV[4], tonumber(ARGV[5])) end
return first`)

// record writes the delivered targets' history and settles r's
// subscriptions but the failed ones.
func (d *Delivery) record(ctx context.Context, tag string, r Request, targets []*target, failed map[string]bool) error {
	now := d.now().UnixMilli()
	args := []any{r.ComicID, 0, r.Gen, r.Wave, now}
	n := 0
	for _, t := range targets {
		if t.sentErr != nil {
			continue
		}
		hist, _ := json.Marshal(Notified{SubscriptionID: t.sub.ID, Gen: r.Gen, Wave: r.Wave, AtMs: now, Channel: t.channel})
		ev, _ := json.Marshal(Event{Kind: EventNotified, ComicID: r.ComicID, Gen: r.Gen, AtMs: now,
			Email: t.sub.Email, SubscriptionID: t.sub.ID, TraceID: flow.TraceIDFrom(ctx)})
		args = append(args, t.sub.Email, hist, ev)
		n++
	}
	args[1] = n
	for _, id := range r.SubscriptionIDs {
		if !failed[id] {
			args = append(args, id)
		}
	}
	err := recordScript.Run(ctx, d.rdb, []string{notifiedKey(tag, r.ComicID), pendingKey(tag, r.ComicID), eventsStream(d.topics, r.ComicID),
		holdKey(tag, r.ComicID), holdsKey(tag)}, args...).Err()
	if err != nil {
		return fmt.Errorf("comic: record notifications: %w", err)
	}
	return nil
}

// DiscardStage drops requests from the pending set without delivering:
// the null delivery of matching benchmarks.
func (d *Delivery) DiscardStage(group string) stream.Stage {
	return stream.Stage{Name: group, Topic: d.topics.Notify, BatchHandler: func(ctx context.Context, msgs []*stream.Message) error {
		pipe := d.rdb.Pipeline()
		for _, m := range msgs {
			var r Request
			if json.Unmarshal(m.Payload, &r) == nil && r.ComicID != "" && len(r.SubscriptionIDs) > 0 {
				pipe.SRem(ctx, pendingKey(d.topics.tag(r.ComicID), r.ComicID), r.SubscriptionIDs) // go-redis spreads a []string
			}
		}
		if _, err := pipe.Exec(ctx); err != nil { // none queued: nil
			return fmt.Errorf("comic: discard pending: %w", err)
		}
		return nil
	}}
}

// KindNotify is the stored kind of comic POST /notify destinations.
const KindNotify = "comic_notify"

// NotifyKind is the comic_notify kind: signed JSON (NotifyBody) to an
// http(s) endpoint over the webhook channel.
func NotifyKind() subscriber.Kind { return notifier.SignedJSONKind(KindNotify) }
