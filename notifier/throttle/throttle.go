// Package throttle limits the notifier's sends with Redis token buckets,
// one per destination and one per channel, and blocks a destination until
// its receiver's Retry-After.
//
// A bucket is the hash ds:{notifier}:throttle:<name> (fields tokens and ts,
// Unix ms); blocks are the sorted set ds:{notifier}:throttle:blocked
// (destination → Unix ms of its end). A send takes a token from every
// bucket it has or from none.
package throttle

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/rediskey"
	"github.com/dropstream/dropstream/internal/script"
	"github.com/dropstream/dropstream/internal/settings"
	"github.com/dropstream/dropstream/internal/tick"
)

// Limit is a token bucket's rate and burst. The zero Limit is unlimited.
type Limit struct {
	// Rate is the sustained sends per second; 0 is unlimited.
	Rate float64 `json:"rate"`
	// Burst is the sends at once after a pause. Default max(1, Rate).
	Burst int `json:"burst"`
}

// Unlimited reports whether the limit never refuses.
func (l Limit) Unlimited() bool { return l.Rate <= 0 }

func (l Limit) burst() int {
	if l.Burst > 0 {
		return l.Burst
	}
	return max(1, int(l.Rate))
}

// Config configures a Throttle. Zero fields take their defaults.
type Config struct {
	// Destination is the limit of each destination. Default 10/s, burst 20.
	Destination Limit
	// Channels are the limits by channel name; others are unlimited.
	Channels map[string]Limit
	// Disabled turns every bucket off (Retry-After blocks still apply).
	Disabled bool
	// IdleTTL is how long an untouched bucket is kept. Default 1h.
	IdleTTL time.Duration `default:"1h" range:"1s.."`
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.Destination == (Limit{}) {
		c.Destination = Limit{Rate: 10, Burst: 20}
	}
	settings.Defaults(&c)
	c.Now = tick.Or(c.Now)
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c Config) Validate() error {
	errs := []error{settings.Check("throttle", &c)}
	check := func(name string, l Limit) {
		if l.Rate < 0 || l.Rate > 1e6 || l.Burst < 0 || l.Burst > 1e6 {
			errs = append(errs, fmt.Errorf("throttle: %s limit %+v: want rate 0..1e6 and burst 0..1e6", name, l))
		}
	}
	check("destination", c.Destination)
	for name, l := range c.Channels {
		check("channel "+name, l)
	}
	return errors.Join(errs...)
}

// Throttle hands out send permissions. It is safe for concurrent use.
type Throttle struct {
	rdb redis.UniversalClient
	cfg Config
	// Script arguments fixed by the config, boxed once: per send they
	// were about 6 % of a delivery's allocations (BENCHMARKS.md,
	// "Notifier: webhooks over fasthttp").
	idleTTL  any
	destArgs []any
	channels map[string]channelArgs
	dests    *lru.Cache[string, destArgs]
}

// channelArgs are a limited channel's bucket key and script arguments.
type channelArgs struct {
	keys []string
	args []any
}

// destArgs are a destination's keys (blocked set, bucket) and name, boxed.
type destArgs struct {
	keys []any
	dest any
}

// maxDestArgs bounds the remembered destination arguments.
const maxDestArgs = 4096

// limitArgs are takeScript's rate and burst arguments of l.
func limitArgs(l Limit) []any {
	if l.Unlimited() {
		return []any{0, 0}
	}
	return []any{strconv.FormatFloat(l.Rate, 'f', -1, 64), l.burst()}
}

// New returns a throttle over rdb.
func New(rdb redis.UniversalClient, cfg Config) (*Throttle, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dests, _ := lru.New[string, destArgs](maxDestArgs) // fails only for a size below 1
	t := &Throttle{rdb: rdb, cfg: cfg, idleTTL: cfg.IdleTTL.Milliseconds(), destArgs: limitArgs(cfg.Destination),
		channels: make(map[string]channelArgs, len(cfg.Channels)), dests: dests}
	for name, l := range cfg.Channels {
		if !l.Unlimited() {
			t.channels[name] = channelArgs{keys: []string{ChannelKey(name)}, args: limitArgs(l)}
		}
	}
	return t, nil
}

// tag is the hash tag of every throttle key, the notifier's.
var tag = rediskey.Tag("notifier")

// DestinationKey is the bucket key of a destination.
func DestinationKey(dest string) string { return rediskey.Key(tag, "throttle", "dest", dest) }

// ChannelKey is the bucket key of a channel.
func ChannelKey(channel string) string { return rediskey.Key(tag, "throttle", "channel", channel) }

// BlockedKey is the sorted set of blocked destinations by end (Unix ms).
const BlockedKey = rediskey.Prefix + "{notifier}" + rediskey.Sep + "throttle" + rediskey.Sep + "blocked"

// takeScript takes a token from each bucket or none; it returns 0 or the
// wait in ms. KEYS: blocked set, buckets. ARGV: now, idle ttl, destination,
// then rate and burst per bucket.
var takeScript = script.New(`
local now = tonumber(ARGV[1])
local wait = 0
local blocked = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[3])) or 0
if blocked > now then wait = blocked - now end
local state = {}
for i = 2, #KEYS do
  local rate, burst = tonumber(ARGV[2 * i]), tonumber(ARGV[1 + 2 * i])
  local tokens = burst
  if rate > 0 then
    local v = redis.call('HMGET', KEYS[i], 'tokens', 'ts')
    tokens = tonumber(v[1]) or burst
    local ts = tonumber(v[2]) or now
    tokens = math.min(burst, tokens + math.max(0, now - ts) * rate / 1000)
    if tokens < 1 then wait = math.max(wait, math.ceil((1 - tokens) * 1000 / rate)) end
  end
  state[i] = {rate, tokens}
end
if wait > 0 then return wait end
for i = 2, #KEYS do
  if state[i][1] > 0 then
    redis.call('HSET', KEYS[i], 'tokens', tostring(state[i][2] - 1), 'ts', ARGV[1])
    redis.call('PEXPIRE', KEYS[i], ARGV[2])
  end
end
return 0`)

// Take takes a send permission for dest on channel: 0, or the wait.
func (t *Throttle) Take(ctx context.Context, dest, channel string) (time.Duration, error) {
	waits, errs := t.TakeMany(ctx, []Ask{{Dest: dest, Channel: channel}})
	return waits[0], errs[0]
}

// hasBucket reports whether a send on channel takes a token from a bucket.
func (t *Throttle) hasBucket(channel string) bool {
	return !t.cfg.Disabled && (!t.cfg.Destination.Unlimited() || !t.cfg.Channels[channel].Unlimited())
}

// dest returns dest's arguments, boxed once.
func (t *Throttle) dest(dest string) destArgs {
	if a, ok := t.dests.Get(dest); ok {
		return a
	}
	a := destArgs{keys: []any{BlockedKey, DestinationKey(dest)}, dest: dest}
	t.dests.Add(dest, a)
	return a
}

// Ask is one send permission asked of TakeMany.
type Ask struct {
	Dest, Channel string
}

// TakeMany is Take for many asks in one round trip.
func (t *Throttle) TakeMany(ctx context.Context, asks []Ask) ([]time.Duration, []error) {
	waits := make([]time.Duration, len(asks))
	errs := make([]error, len(asks))
	if len(asks) == 0 {
		return waits, errs
	}
	now := t.cfg.Now().UnixMilli()
	nowArg := any(now)
	var scripted, free []int
	calls := make([]script.Call, 0, len(asks))
	var members []string
	// The calls' arguments share one array, sized for the most.
	args := make([]any, 0, (3+len(t.destArgs)+2)*len(asks))
	for i, a := range asks {
		if !t.hasBucket(a.Channel) {
			free, members = append(free, i), append(members, a.Dest)
			continue
		}
		// An unlimited channel's bucket is left out: the script reads
		// only the buckets given.
		ch := t.channels[a.Channel]
		dest := t.dest(a.Dest)
		n := len(args)
		args = append(append(append(args, nowArg, t.idleTTL, dest.dest), t.destArgs...), ch.args...)
		scripted = append(scripted, i)
		calls = append(calls, script.Call{Boxed: dest.keys, Keys: ch.keys, Args: args[n:len(args):len(args)]})
	}
	pipe := t.rdb.Pipeline()
	var blocks *redis.FloatSliceCmd
	if len(free) > 0 {
		blocks = pipe.ZMScore(ctx, BlockedKey, members...)
	}
	cmds := takeScript.Queue(ctx, pipe, calls)
	_, _ = pipe.Exec(ctx)
	// Takes that found no script (a flushed Redis) did nothing: send them again.
	_ = takeScript.Retry(ctx, t.rdb, cmds)
	for j, i := range scripted {
		ms, err := cmds[j].Int64()
		if err != nil {
			errs[i] = fmt.Errorf("throttle: take %s: %w", asks[i].Dest, err)
			continue
		}
		waits[i] = time.Duration(ms) * time.Millisecond
	}
	if blocks != nil {
		scores, err := blocks.Result()
		for k, i := range free {
			switch {
			case err != nil:
				errs[i] = fmt.Errorf("throttle: blocks of %s: %w", asks[i].Dest, err)
			case k < len(scores) && int64(scores[k]) > now:
				waits[i] = time.Duration(int64(scores[k])-now) * time.Millisecond
			}
		}
	}
	return waits, errs
}

// Block stops sends to dest until until, unless it is blocked longer.
func (t *Throttle) Block(ctx context.Context, dest string, until time.Time) error {
	err := blockScript.Run(ctx, t.rdb, []string{BlockedKey}, dest, until.UnixMilli(), t.cfg.Now().UnixMilli(),
		t.cfg.IdleTTL.Milliseconds()).Err()
	if err != nil {
		return fmt.Errorf("throttle: block %s: %w", dest, err)
	}
	return nil
}

// blockScript raises a block and forgets ended ones. KEYS: blocked set.
// ARGV: destination, until, now, idle ttl (ms).
var blockScript = script.New(`
local b = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1])) or 0
if tonumber(ARGV[2]) > b then redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1]) end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[3])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if #last == 2 then
  redis.call('PEXPIRE', KEYS[1], string.format('%.0f', tonumber(last[2]) - tonumber(ARGV[3]) + tonumber(ARGV[4])))
end
return 1`)
