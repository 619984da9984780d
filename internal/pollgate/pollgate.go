// Package pollgate lets copies of a polling service share one schedule
// through Redis, without a leader: a copy polls an item only after taking
// its gate, closed until the next poll is due, so each item is polled once
// per delay and a dead copy's items pass to the others.
package pollgate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/bounds"
	"github.com/dropstream/dropstream/internal/rediskey"
	"github.com/dropstream/dropstream/internal/tick"
)

// takeScript closes an open gate KEYS[1] for ARGV[2] ms with owner ARGV[1]
// and returns -1; else the ms it stays closed (0: no expiry).
var takeScript = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return -1 end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then return 0 end
return ttl`)

// holdScript keeps the gate KEYS[1] closed for ARGV[2] ms when ARGV[1]
// holds it (1), else changes nothing (0).
var holdScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1`)

// openScript opens the gate KEYS[1] when ARGV[1] holds it.
var openScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)

// Defaults of Config.
const (
	// DefaultSpread is the default Config.Spread.
	DefaultSpread = time.Second
	// MinHold is the shortest time a gate can be closed for.
	MinHold = time.Millisecond
)

// Config configures a Gate.
type Config struct {
	// Owner names this copy in the gates it closes (a consumer name: host,
	// pid and a random part). Required.
	Owner string
	// Spread bounds the random delay after a gate opens before a copy
	// tries it, at most a tenth of the hold. Default DefaultSpread.
	Spread time.Duration
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.Spread = cmp.Or(c.Spread, DefaultSpread)
	return c
}

// Validate checks c (after WithDefaults).
func (c Config) Validate() error {
	var errs []error
	if c.Owner == "" {
		errs = append(errs, errors.New("pollgate: Owner is empty"))
	}
	if c.Spread < 0 {
		errs = append(errs, fmt.Errorf("pollgate: Spread %v is negative", c.Spread))
	}
	return errors.Join(errs...)
}

// Gate takes and holds the gates of one copy of a polling service. It is
// safe for concurrent use.
type Gate struct {
	rdb redis.UniversalClient
	cfg Config
}

// New returns the gates of the copy named cfg.Owner on rdb.
func New(rdb redis.UniversalClient, cfg Config) (*Gate, error) {
	return build(rdb, cfg, func(c Config) *Gate { return &Gate{rdb: rdb, cfg: c} })
}

// build returns newT(cfg) with cfg defaulted, or why rdb or cfg cannot be
// used.
func build[C interface {
	WithDefaults() C
	Validate() error
}, T any](rdb redis.UniversalClient, cfg C, newT func(C) *T) (*T, error) {
	if rdb == nil {
		return nil, errors.New("pollgate: redis client is nil")
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return newT(cfg), nil
}

// Take closes an open gate for hold and returns true; else false and when
// to try again.
func (g *Gate) Take(ctx context.Context, key string, hold time.Duration) (bool, time.Duration, error) {
	ms, err := takeScript.Run(ctx, g.rdb, []string{key}, g.cfg.Owner, millis(hold)).Int64()
	if err != nil {
		return false, 0, fmt.Errorf("pollgate: take %s: %w", key, err)
	}
	if ms < 0 {
		return true, 0, nil
	}
	left := time.Duration(ms) * time.Millisecond
	if ms == 0 {
		left = hold // a gate without expiry: look again later
	}
	return false, left + g.jitter(left), nil
}

// Hold keeps this copy's gate closed for d and returns when to try again;
// a gate no longer this copy's is left alone.
func (g *Gate) Hold(ctx context.Context, key string, d time.Duration) (time.Duration, error) {
	if err := holdScript.Run(ctx, g.rdb, []string{key}, g.cfg.Owner, millis(d)).Err(); err != nil {
		return d + g.jitter(d), fmt.Errorf("pollgate: hold %s: %w", key, err)
	}
	return d + g.jitter(d), nil
}

// Open opens the gate key if this copy holds it, so another copy may poll
// the item at once (a poll abandoned at shutdown).
func (g *Gate) Open(ctx context.Context, key string) error {
	if err := openScript.Run(ctx, g.rdb, []string{key}, g.cfg.Owner).Err(); err != nil {
		return fmt.Errorf("pollgate: open %s: %w", key, err)
	}
	return nil
}

// jitter is a random part of the spread, at most a tenth of d.
func (g *Gate) jitter(d time.Duration) time.Duration {
	s := min(g.cfg.Spread, d/10)
	if s <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(s) + 1))
}

func millis(d time.Duration) int64 {
	return max(d, MinHold).Milliseconds()
}

// paceScript books KEYS[1]'s next slot, max(now, the key's), moves the key
// ARGV[2] ms past it and returns the ms to wait. Idle keys expire.
var paceScript = redis.NewScript(`
local now, spacing = tonumber(ARGV[1]), tonumber(ARGV[2])
local slot = tonumber(redis.call('GET', KEYS[1]) or '0')
if slot < now then slot = now end
redis.call('SET', KEYS[1], tostring(slot + spacing), 'PX', slot + spacing - now + spacing)
return slot - now`)

// PacerConfig configures a Pacer.
type PacerConfig struct {
	// Name scopes the pacer's keys ("feed"): pacers of one name share each
	// host's budget. Required: 1..32 characters of [a-z0-9-].
	Name string
	// Spacing is the least time between two requests to one host, across
	// every copy. Default 200ms (5 requests a second).
	Spacing time.Duration
	// MaxWait bounds how far ahead a request may book its slot; a host
	// whose queue is longer answers ErrBusy. Default 1m.
	MaxWait time.Duration
	// Now is the clock of the slots (every copy's must agree). Default
	// time.Now.
	Now func() time.Time
}

// ErrBusy: the host's queue is longer than PacerConfig.MaxWait.
var ErrBusy = errors.New("pollgate: host busy")

// WithDefaults returns c with zero fields set to their defaults.
func (c PacerConfig) WithDefaults() PacerConfig {
	c.Spacing = cmp.Or(c.Spacing, 200*time.Millisecond)
	c.MaxWait = cmp.Or(c.MaxWait, time.Minute)
	c.Now = tick.Or(c.Now)
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c PacerConfig) Validate() error {
	var errs []error
	if c.Name == "" || len(c.Name) > 32 || strings.Trim(c.Name, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
		errs = append(errs, fmt.Errorf("pollgate: pacer name %q: want 1..32 of [a-z0-9-]", c.Name))
	}
	errs = bounds.CheckText(errs, "pollgate: spacing", c.Spacing, time.Millisecond, time.Hour, "1ms..1h")
	if c.MaxWait < c.Spacing {
		errs = append(errs, fmt.Errorf("pollgate: max wait %s below the spacing %s", c.MaxWait, c.Spacing))
	}
	return errors.Join(errs...)
}

// Pacer spaces the requests to each host across every copy of a service
// through a Redis slot per host, at most one per Spacing. It is safe for
// concurrent use.
type Pacer struct {
	rdb redis.UniversalClient
	cfg PacerConfig
}

// NewPacer returns a pacer over rdb.
func NewPacer(rdb redis.UniversalClient, cfg PacerConfig) (*Pacer, error) {
	return build(rdb, cfg, func(c PacerConfig) *Pacer { return &Pacer{rdb: rdb, cfg: c} })
}

// Key is the Redis key of a host's next slot.
func (p *Pacer) Key(host string) string {
	return rediskey.Key("{pace:"+p.cfg.Name+":"+strings.ToLower(host)+"}", "next")
}

// Reserve books the host's next slot and returns how long until it; a slot
// beyond MaxWait gives ErrBusy (and passes unused).
func (p *Pacer) Reserve(ctx context.Context, host string) (time.Duration, error) {
	ms, err := paceScript.Run(ctx, p.rdb, []string{p.Key(host)}, p.cfg.Now().UnixMilli(), p.cfg.Spacing.Milliseconds()).Int64()
	if err != nil {
		return 0, fmt.Errorf("pollgate: pace %s: %w", host, err)
	}
	wait := time.Duration(ms) * time.Millisecond
	if wait > p.cfg.MaxWait {
		return wait, fmt.Errorf("%w: %s waits %s", ErrBusy, host, wait)
	}
	return wait, nil
}

// Wait books the host's next slot and waits for it (or ctx).
func (p *Pacer) Wait(ctx context.Context, host string) error {
	wait, err := p.Reserve(ctx, host)
	if err != nil || wait <= 0 {
		return err
	}
	return tick.Sleep(ctx, wait)
}
