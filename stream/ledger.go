package stream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/bounds"
	"github.com/dropstream/dropstream/internal/rediskey"
)

// LedgerConfig configures an idempotency ledger.
type LedgerConfig struct {
	// Name scopes the ledger's keys (for example the stage that applies the
	// effects). Required.
	Name string
	// TTL is how long a recorded key is remembered. It must outlive every
	// possible redelivery or replay of the message. Default 7 days.
	TTL time.Duration
}

// Validate checks the config after defaults.
func (c LedgerConfig) Validate() error {
	errs := bounds.Require(nil, validName(c.Name), "ledger name %q: want 1-64 characters of [a-z0-9_-]", c.Name)
	return errors.Join(bounds.Require(errs, c.TTL >= time.Second, "ledger ttl %s below 1s", c.TTL)...)
}

// Ledger remembers which effects were applied, by business key, so a
// redelivered or replayed message applies its effect once. Its keys carry a
// hash tag, so an Effect updates ledger and data in one script on Cluster.
type Ledger struct {
	rdb redis.UniversalClient
	cfg LedgerConfig
	ttl string
}

// NewLedger returns a ledger; TTL defaults to 7 days.
func NewLedger(rdb redis.UniversalClient, cfg LedgerConfig) (*Ledger, error) {
	cfg.TTL = cmp.Or(cfg.TTL, 7*24*time.Hour)
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Ledger{rdb: rdb, cfg: cfg, ttl: strconv.FormatInt(cfg.TTL.Milliseconds(), 10)}, nil
}

// Key returns the Redis key recording businessKey in the slot of hashTag
// (see Topic.HashTag), the tag of the keys the effect touches.
func (l *Ledger) Key(hashTag, businessKey string) string {
	return rediskey.Key(hashTag, "ledger", l.cfg.Name, businessKey)
}

// Effect is a Lua script applied at most once per ledger key: a function
// body called with the caller's (KEYS, ARGV), returning Apply's result. It
// must check its inputs before writing (Redis does not roll back); a body
// that raises or returns redis.error_reply records nothing.
type Effect struct{ script *redis.Script }

// NewEffect wraps a Lua body into a ledger-guarded script.
func NewEffect(body string) *Effect {
	src := `local function effect(KEYS, ARGV)
` + body + `
end
if redis.call('EXISTS', KEYS[1]) == 1 then return {0} end
local k = {}
for i = 2, #KEYS do k[#k + 1] = KEYS[i] end
local a = {}
for i = 2, #ARGV do a[#a + 1] = ARGV[i] end
local r = effect(k, a)
if type(r) == 'table' and r.err then return r end
redis.call('SET', KEYS[1], '1', 'PX', ARGV[1])
return {1, r}`
	return &Effect{script: redis.NewScript(src)}
}

// Hash returns the SHA1 of the effect's script, as EVALSHA names it.
func (e *Effect) Hash() string { return e.script.Hash() }

// Apply runs the effect unless ledgerKey is recorded, recording it in the
// same atomic step; applied is false when it was. All keys, ledgerKey
// included, must share one hash tag.
func (l *Ledger) Apply(ctx context.Context, e *Effect, ledgerKey string, keys []string, args ...any) (applied bool, result any, err error) {
	allKeys := append([]string{ledgerKey}, keys...)
	allArgs := append([]any{l.ttl}, args...)
	res, err := e.script.Run(ctx, l.rdb, allKeys, allArgs...).Slice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, nil, fmt.Errorf("ledger apply %s: %w", ledgerKey, err)
	}
	if len(res) == 0 {
		return false, nil, fmt.Errorf("ledger apply %s: empty reply", ledgerKey)
	}
	if n, _ := res[0].(int64); n != 1 {
		return false, nil, nil
	}
	if len(res) > 1 {
		result = res[1]
	}
	return true, result, nil
}
