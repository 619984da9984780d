package notifier

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/dropstream/dropstream/internal/rediskey"
	"github.com/dropstream/dropstream/internal/script"
	"github.com/dropstream/dropstream/internal/settings"
	"github.com/dropstream/dropstream/internal/tick"
	"github.com/dropstream/dropstream/stream"
)

// RetryService sends due retries back to the stream; copies may run.
const RetryService = "notifier-retries"

// MetaAttempt is the metadata field of a request's attempt (absent: 1).
const MetaAttempt = "notify.attempt"

// RetryConfig configures retries: a jittered pause doubling from Initial
// to Max, honouring Retry-After, then the dead letter. Zero takes defaults.
type RetryConfig struct {
	// MaxAttempts is the tries before the dead letter; a delivery whose time
	// ran out before its send tried nothing. Default 8, range 1..100.
	MaxAttempts int `default:"8" range:"1..100"`
	// Initial is the pause after the first failed attempt. Default 1s.
	Initial time.Duration `default:"1s" range:"1ms.."`
	// Max caps the doubling pause. Default 5m.
	Max time.Duration `range:"Initial..24h"`
	// PollInterval is how often RunRetries looks for due retries. Default 250ms.
	PollInterval time.Duration `default:"250ms" range:"1ms..1m"`
}

// WithDefaults returns c with every zero field set to its default.
func (c RetryConfig) WithDefaults() RetryConfig {
	settings.Defaults(&c)
	if c.Max == 0 {
		c.Max = max(5*time.Minute, c.Initial)
	}
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c RetryConfig) Validate() error {
	return settings.Check("notifier: retry", &c)
}

// Delay is the pause after failed attempt (1-based): min(Initial ×
// 2^(attempt-1), Max) = p, put in [p/2, p] by r in [0, 1).
func (c RetryConfig) Delay(attempt int, r float64) time.Duration {
	p := stream.BackoffAfter(attempt, c.Initial, c.Max)
	return p/2 + time.Duration(r*float64(p-p/2))
}

// retryKeys are partition p's retry schedule keys (see the package doc).
func (d *Deliverer) retryKeys(p int) (schedule, entries string) {
	base := rediskey.Key(d.topic.HashTag(p), "notifier", "retry")
	return base, base + ":msgs"
}

// scheduleScript files entry ARGV[1] for attempt ARGV[3] at ARGV[2] ms,
// once per id; 0 when the entry is gone. KEYS: stream, schedule, entries.
var scheduleScript = script.New(`
local e = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])
if #e == 0 then return 0 end
local f = e[1][2]
local out = {}
for i = 1, #f, 2 do
  if f[i] ~= 'notify.attempt' then out[#out + 1] = f[i]; out[#out + 1] = f[i + 1] end
end
out[#out + 1] = 'notify.attempt'
out[#out + 1] = ARGV[3]
redis.call('HSET', KEYS[3], ARGV[1], cjson.encode(out))
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
return 1`)

// moveScript moves up to ARGV[2] retries due by ARGV[1] to the stream and
// returns how many it looked at. KEYS: schedule, entries, stream.
var moveScript = script.New(`
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, id in ipairs(ids) do
  local v = redis.call('HGET', KEYS[2], id)
  if v then
    local ok, f = pcall(cjson.decode, v)
    if ok and type(f) == 'table' and #f >= 2 then redis.call('XADD', KEYS[3], '*', unpack(f)) end
    redis.call('HDEL', KEYS[2], id)
  end
  redis.call('ZREM', KEYS[1], id)
end
return #ids`)

// attemptOf is a request's MetaAttempt (absent: 1).
func attemptOf(m *stream.Message) int {
	if v, ok := m.Metadata[MetaAttempt]; ok { // a first attempt carries none: no parse error to build
		if a, err := strconv.Atoi(v); err == nil && a > 1 {
			return a
		}
	}
	return 1
}

// untried reports whether no failure in err tried a receiver: each is
// ErrInFlight, or unsent (its context ended before its send).
func untried(err error) bool {
	only := true
	walkErrors(err, func(e error, leaf bool) bool {
		if _, ok := e.(*unsentError); ok {
			return false
		}
		only = only && (!leaf || e == ErrInFlight)
		return true
	})
	return only
}

// walkErrors calls f with err and every error it wraps, depth first, but
// not those under an error for which f returns false; leaf says an error
// wraps none.
func walkErrors(err error, f func(e error, leaf bool) bool) {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		if f(err, false) {
			for _, e := range j.Unwrap() {
				walkErrors(e, f)
			}
		}
	} else if u := errors.Unwrap(err); u != nil {
		if f(err, false) {
			walkErrors(u, f)
		}
	} else {
		f(err, true)
	}
}

// scheduleRetries files retryable failures, or makes them permanent once
// attempts ran out; one that cannot be filed keeps its error. It files
// even after ctx ended: the attempt was made and recorded, so it must not
// come back at the same attempt by a late redelivery.
func (d *Deliverer) scheduleRetries(ctx context.Context, msgs []*stream.Message, errs []error) {
	var calls []script.Call
	var idx []int
	now := time.Now() // wall-clock, as the mover's: DeliverConfig.Now is the subscribers' clock
	for i, m := range msgs {
		if stream.Classify(errs[i]) != stream.OutcomeFailed {
			continue
		}
		attempt, next := attemptOf(m), attemptOf(m)+1
		due := now.Add(max(d.cfg.Retry.Delay(attempt, rand.Float64()), notBefore(errs[i])))
		switch {
		case untried(errs[i]):
			// No receiver was tried: retry on the same attempt, soon when
			// another delivery is sending, else (the handler's time ran out
			// before the send) after this attempt's pause.
			next = attempt
			if !errors.As(errs[i], new(*unsentError)) {
				due = now.Add(d.cfg.Retry.Delay(1, rand.Float64()))
			}
		case attempt >= d.cfg.Retry.MaxAttempts:
			// The dead letter starts again at attempt 1 when replayed.
			delete(m.Metadata, MetaAttempt)
			errs[i] = stream.Permanent(fmt.Errorf("notifier: gave up after %d attempts: %w", attempt, errs[i]))
			continue
		}
		schedule, entries := d.retryKeys(m.Partition)
		calls = append(calls, script.Call{Keys: []string{m.Stream, schedule, entries},
			Args: []any{m.ID, due.UnixMilli(), next}})
		idx = append(idx, i)
	}
	if len(calls) == 0 {
		return
	}
	sctx, cancel := settleContext(ctx)
	defer cancel()
	cmds, _ := scheduleScript.RunAll(sctx, d.rdb, calls) // a failed load is each retried command's error
	for k, c := range cmds {
		i := idx[k]
		switch _, err := c.Int(); {
		case err != nil:
			d.logger.WarnContext(ctx, "notifier: retry not scheduled; the message waits for its redelivery",
				"message_id", msgs[i].ID, "error", err)
		default:
			errs[i] = nil // filed, or (n == 0) gone from the stream: nothing left to retry
		}
	}
}

// notBefore is the longest pause err's Retry-After or throttle asks for.
func notBefore(err error) time.Duration {
	var longest time.Duration
	walkErrors(err, func(e error, _ bool) bool {
		switch e := e.(type) {
		case *DeliveryError:
			longest = max(longest, e.RetryAfter)
		case *throttledError:
			longest = max(longest, e.wait)
		}
		return true
	})
	return longest
}

// MoveDueRetries moves every due retry back to the stream; it returns how many.
func (d *Deliverer) MoveDueRetries(ctx context.Context) (int, error) {
	const page = 500
	total := 0
	for {
		calls := make([]script.Call, d.topic.Partitions)
		for p := range calls {
			schedule, entries := d.retryKeys(p)
			calls[p] = script.Call{Keys: []string{schedule, entries, d.topic.Stream(p)}, Args: []any{time.Now().UnixMilli(), page}}
		}
		full := false
		var errs []error
		cmds, _ := moveScript.RunAll(ctx, d.rdb, calls) // a failed load is each retried command's error
		for p, c := range cmds {
			n, err := c.Int()
			if err != nil {
				errs = append(errs, fmt.Errorf("notifier: move retries of partition %d: %w", p, err))
				continue
			}
			total += n
			full = full || n == page
		}
		if err := errors.Join(errs...); err != nil || !full {
			return total, err
		}
	}
}

// RunRetries runs MoveDueRetries every PollInterval until ctx ends.
func (d *Deliverer) RunRetries(ctx context.Context) error {
	tick.Every(ctx, d.cfg.Retry.PollInterval, func() {
		if _, err := d.MoveDueRetries(ctx); err != nil && ctx.Err() == nil {
			d.logger.WarnContext(ctx, "notifier: moving due retries failed", "error", err)
		}
	})
	return nil
}
