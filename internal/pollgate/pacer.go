package pollgate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/bounds"
	"github.com/dropstream/dropstream/internal/rediskey"
	"github.com/dropstream/dropstream/internal/tick"
)

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
