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

	"github.com/dropstream/dropstream/internal/script"
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
type Inventory struct {
	rdb    redis.UniversalClient
	topics Topics
	prop   propagation.TextMapPropagator
	now    func() time.Time
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
