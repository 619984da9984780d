package comic

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	gotel "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/internal/script"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/subscriber"
	"github.com/dropstream/dropstream/stream"
)

// Job is a TypeJob payload, one per intake of a comic into inventory.
type Job struct {
	ComicID   string          `json:"comic_id"`
	Gen       int64           `json:"gen"` // the comic's intakes, from 1
	AddedAtMs int64           `json:"added_at_ms"`
	Comic     json.RawMessage `json:"comic"`
}

// Listing is a comic in inventory.
type Listing struct {
	ID      string    `json:"id"`
	Comic   Comic     `json:"comic"`
	Gen     int64     `json:"gen"`
	AddedAt time.Time `json:"added_at"`
}

// Inventory records comics for sale. Intake is one script that writes the
// listing, its generation, the job and the "listed" event, or nothing.
//
//	ds:{comic.p}:comic:inv:<id>        hash: comic (canonical), gen, added_at_ms
//	ds:{comic.p}:comic:gen:<id>        counter: intakes of the comic
//	ds:{comic.p}:comic:inventory       zset: ids in inventory by added_at_ms
type Inventory struct {
	rdb    redis.UniversalClient
	topics Topics
	prop   propagation.TextMapPropagator
	now    func() time.Time
}

// NewInventory returns the inventory over rdb; prop defaults to the global
// propagator.
func NewInventory(rdb redis.UniversalClient, topics Topics, prop propagation.TextMapPropagator) *Inventory {
	return &Inventory{rdb: rdb, topics: topics, prop: cmp.Or(prop, gotel.GetTextMapPropagator()), now: time.Now}
}

// intakeScript: KEYS inv, gen, jobs stream, events stream, inventory zset;
// ARGV id, canonical comic, now ms, hold window ms (0: the flow's), then
// metadata name/value pairs.
var intakeScript = script.New(`
local cur = redis.call('HGET', KEYS[1], 'gen')
if cur then return {0, tonumber(cur), ''} end
if redis.call('TYPE', KEYS[3]).ok ~= 'stream' and redis.call('EXISTS', KEYS[3]) == 1 then return redis.error_reply('jobs key is not a stream') end
if redis.call('TYPE', KEYS[4]).ok ~= 'stream' and redis.call('EXISTS', KEYS[4]) == 1 then return redis.error_reply('events key is not a stream') end
local gen = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], 'comic', ARGV[2], 'gen', gen, 'added_at_ms', ARGV[3], 'hold_ms', ARGV[4])
redis.call('ZADD', KEYS[5], ARGV[3], ARGV[1])
local job = '{"comic_id":"' .. ARGV[1] .. '","gen":' .. gen .. ',"added_at_ms":' .. ARGV[3] .. ',"comic":' .. ARGV[2] .. '}'
local f = {'key', ARGV[1], 'type', 'comic.job', 'payload', job}
for i = 5, #ARGV do f[#f + 1] = ARGV[i] end
local id = redis.call('XADD', KEYS[3], '*', unpack(f))
local ev = '{"kind":"listed","comic_id":"' .. ARGV[1] .. '","gen":' .. gen .. ',"at_ms":' .. ARGV[3] .. ',"comic":' .. ARGV[2] .. '}'
local e = {'key', ARGV[1], 'type', 'comic.event', 'payload', ev}
for i = 5, #ARGV do e[#e + 1] = ARGV[i] end
redis.call('XADD', KEYS[4], '*', unpack(e))
return {1, gen, id}`)

// traceArgs returns the trace context of ctx as stream metadata pairs.
func traceArgs(ctx context.Context, prop propagation.TextMapPropagator) []any {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	m := &stream.Message{}
	stream.InjectTrace(ctx, cmp.Or(prop, gotel.GetTextMapPropagator()), m)
	out := m.TraceFields()
	for k, v := range m.Metadata {
		out = append(out, k, v)
	}
	return out
}

// Add lists c; created is false when it was listed already. An error
// means nothing was written.
func (inv *Inventory) Add(ctx context.Context, c Comic) (Listing, bool, error) {
	return inv.AddHeld(ctx, c, 0)
}

// AddHeld is Add with the listing's own hold window, 1s..MaxHoldWindow
// (0: the flow's HoldConfig.Window).
func (inv *Inventory) AddHeld(ctx context.Context, c Comic, hold time.Duration) (Listing, bool, error) {
	if err := ValidateComic(c); err != nil {
		return Listing{}, false, err
	}
	if hold != 0 && (hold < time.Second || hold > MaxHoldWindow) {
		return Listing{}, false, &FieldError{Field: "hold_seconds", Reason: fmt.Sprintf("want 1..%d", int(MaxHoldWindow.Seconds()))}
	}
	now := inv.now()
	keys, args := inv.intakeArgs(ctx, c, now, hold)
	res, err := intakeScript.Run(ctx, inv.rdb, keys, args...).Slice()
	if err != nil {
		return Listing{}, false, fmt.Errorf("comic: intake %s: %w", c.ID(), err)
	}
	created, _ := res[0].(int64)
	gen, _ := res[1].(int64)
	if created == 0 {
		l, err := inv.Get(ctx, c.ID())
		return l, false, err
	}
	return Listing{ID: c.ID(), Comic: c, Gen: gen, AddedAt: time.UnixMilli(now.UnixMilli()).UTC()}, true, nil
}

// intakeArgs returns the keys and arguments of the intake script for c.
func (inv *Inventory) intakeArgs(ctx context.Context, c Comic, now time.Time, hold time.Duration) ([]string, []any) {
	id, canonical := c.ID(), c.Canonical()
	tag := inv.topics.tag(id)
	args := append([]any{id, canonical, now.UnixMilli(), hold.Milliseconds()}, traceArgs(ctx, inv.prop)...)
	return []string{inventoryKey(tag, id), genKey(tag, id), inv.topics.Jobs.Stream(inv.topics.Jobs.Partition(id)),
		eventsStream(inv.topics, id), inventoryIndex(tag)}, args
}

// AddMany is Add for comics in one pipeline; an invalid comic fails
// before any write, a Redis error may leave a prefix listed.
func (inv *Inventory) AddMany(ctx context.Context, comics []Comic) ([]bool, error) {
	for i, c := range comics {
		if err := ValidateComic(c); err != nil {
			return nil, fmt.Errorf("comic %d: %w", i, err)
		}
	}
	now := inv.now()
	calls := make([]script.Call, len(comics))
	for i, c := range comics {
		keys, args := inv.intakeArgs(ctx, c, now, 0)
		calls[i] = script.Call{Keys: keys, Args: args}
	}
	cmds, _ := intakeScript.RunAll(ctx, inv.rdb, calls) // errors are read per command
	created := make([]bool, len(comics))
	for i, cmd := range cmds {
		res, err := cmd.Slice()
		if err != nil {
			return nil, fmt.Errorf("comic: intake %s: %w", comics[i].ID(), err)
		}
		n, _ := res[0].(int64)
		created[i] = n == 1
	}
	return created, nil
}

// Get returns the listing of a comic in inventory; the error wraps
// ErrNotFound when it is not there.
func (inv *Inventory) Get(ctx context.Context, id string) (Listing, error) {
	m, err := inv.rdb.HGetAll(ctx, inventoryKey(inv.topics.tag(id), id)).Result()
	if err != nil {
		return Listing{}, fmt.Errorf("comic: inventory %s: %w", id, err)
	}
	if len(m) == 0 {
		return Listing{}, fmt.Errorf("%w: comic %s not in inventory", ErrNotFound, clipName(id))
	}
	return listingOf(id, m)
}

// listingOf decodes the fields of a comic's inventory hash.
func listingOf(id string, m map[string]string) (Listing, error) {
	var c Comic
	if err := json.Unmarshal([]byte(m["comic"]), &c); err != nil {
		return Listing{}, fmt.Errorf("comic: decode inventory %s: %w", id, err)
	}
	gen, _ := strconv.ParseInt(m["gen"], 10, 64)
	at, _ := strconv.ParseInt(m["added_at_ms"], 10, 64)
	return Listing{ID: id, Comic: c, Gen: gen, AddedAt: time.UnixMilli(at).UTC()}, nil
}

// Status is the state of a comic's notification job.
type Status struct {
	ID          string `json:"id"`
	InInventory bool   `json:"in_inventory"`
	Gen         int64  `json:"gen"`         // the latest intake
	MatchedGen  int64  `json:"matched_gen"` // the latest matched
	Pending     int64  `json:"pending"`     // handed off, not yet delivered
	Notified    int64  `json:"notified"`    // emails notified
	// Done is true when the latest job is matched and nothing is pending.
	Done bool `json:"done"`
}

// Status returns the notification state of a comic.
func (inv *Inventory) Status(ctx context.Context, id string) (Status, error) {
	tag := inv.topics.tag(id)
	pipe := inv.rdb.Pipeline()
	exists := pipe.Exists(ctx, inventoryKey(tag, id))
	gen := pipe.Get(ctx, genKey(tag, id))
	done := pipe.Get(ctx, jobDoneKey(tag, id))
	pending := pipe.SCard(ctx, pendingKey(tag, id))
	notified := pipe.HLen(ctx, notifiedKey(tag, id))
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return Status{}, fmt.Errorf("comic: status %s: %w", id, err)
	}
	st := Status{ID: id, InInventory: exists.Val() == 1, Pending: pending.Val(), Notified: notified.Val()}
	st.Gen, _ = strconv.ParseInt(gen.Val(), 10, 64)
	st.MatchedGen, _ = strconv.ParseInt(done.Val(), 10, 64)
	if st.Gen == 0 {
		return Status{}, fmt.Errorf("%w: comic %s never listed", ErrNotFound, clipName(id))
	}
	st.Done = st.MatchedGen >= st.Gen && st.Pending == 0
	return st, nil
}

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
	Concurrency int
}

// ChannelNotifier is the history's channel of a relayed notification.
const ChannelNotifier = "notifier"

// Validate checks the config.
func (c DeliveryConfig) Validate() error {
	if c.Concurrency < 0 {
		return fmt.Errorf("comic: delivery concurrency %d is negative", c.Concurrency)
	}
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

// Delivery delivers pending notifications once per (comic, email) and
// records the history in one script. A message with failed deliveries is
// retried.
//
//	ds:{comic.p}:comic:pending:<id>    set: subscription ids handed off, not yet delivered
//	ds:{comic.p}:comic:notified:<id>   hash: email → Notified, the history
type Delivery struct {
	rdb    redis.UniversalClient
	topics Topics
	store  *Store
	d      Deliverer
	cfg    DeliveryConfig
	now    func() time.Time
}

// NewDelivery returns the delivery stage's handler.
func NewDelivery(rdb redis.UniversalClient, topics Topics, store *Store, d Deliverer, cfg DeliveryConfig) (*Delivery, error) {
	cfg.Concurrency = cmp.Or(cfg.Concurrency, 8)
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
		if pipe.Len() == 0 {
			return nil
		}
		if _, err := pipe.Exec(ctx); err != nil {
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
