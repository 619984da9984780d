package stream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/rediskey"
	"github.com/dropstream/dropstream/internal/script"
)

// Consumer names. A copy holds its consumer name by a lease in Redis,
// renewed every ConsumerLease/3, so that two live copies never read under
// one name (with a stable Instance, a process restarted while its old self
// still runs would). A copy starting under a name takes the lease over
// whoever holds it; the copy that held it sees its lease gone at its next
// renewal and stops: its Run returns ErrConsumerTaken.
//
// Consumers left behind (copies with names of their own that crashed, or
// instances retired) are deleted once they have nothing pending and have
// been idle for ConsumerIdle, by a script that checks both and deletes in
// one step: a consumer with pending entries is never deleted, as that would
// drop its entries from the group. A copy stopping gracefully deletes its
// own consumer when it has nothing pending.

// ErrConsumerTaken is returned by Run when another copy took over the
// runner's consumer name.
var ErrConsumerTaken = errors.New("stream: consumer name taken over by another copy")

var (
	// renewLease extends the lease KEYS[1] by ARGV[2] ms if it still
	// holds the token ARGV[1]; 0 when it does not.
	renewLease = script.New(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0`)
	// releaseLease deletes the lease KEYS[1] if it holds the token ARGV[1].
	releaseLease = script.New(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)
	// deleteIdleConsumer deletes consumer ARGV[2] of group ARGV[1] on stream
	// KEYS[1] if it has no pending entry and has been idle for at least
	// ARGV[3] ms (any time when ARGV[3] is 0, even unknown: an embedded
	// Redis reports -1 for consumers that only read); 1 when deleted.
	deleteIdleConsumer = script.New(`
if #redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', 1, ARGV[2]) > 0 then
  return 0
end
local idle = nil
for _, c in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])) do
  local f = {}
  for i = 1, #c, 2 do f[c[i]] = c[i + 1] end
  if f['name'] == ARGV[2] then
    idle = tonumber(f['idle'])
  end
end
local min = tonumber(ARGV[3])
if idle == nil or (min > 0 and idle < min) then
  return 0
end
redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2])
return 1`)
)

// consumerLease is a runner's hold on its consumer name.
type consumerLease struct {
	r     *Runner
	key   string
	token string
}

// leaseKey is the key of the lease on the runner's consumer name.
func (r *Runner) leaseKey() string {
	return rediskey.Key(r.stage.Topic.HashTag(0), "consumer", r.stage.Topic.Name, r.cfg.Group, r.cfg.Consumer)
}

// acquireLease takes the lease on the consumer name, from whoever holds it.
func (r *Runner) acquireLease(ctx context.Context) (*consumerLease, error) {
	l := &consumerLease{r: r, key: r.leaseKey(), token: DefaultConsumerName()}
	prev, err := r.rdb.SetArgs(ctx, l.key, l.token, redis.SetArgs{TTL: r.cfg.ConsumerLease, Get: true}).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("lease on consumer %s: %w", r.cfg.Consumer, err)
	}
	if prev != "" {
		r.tel.Logger.WarnContext(ctx, "consumer name taken over from a live copy", "stage", r.stage.Name, "consumer", r.cfg.Consumer)
	}
	return l, nil
}

// hold renews the lease until ctx ends; it returns true as soon as it
// finds the lease held by another copy (or gone). Renewal errors are
// logged and retried.
func (l *consumerLease) hold(ctx context.Context) bool {
	t := time.NewTicker(l.r.cfg.ConsumerLease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
		n, err := renewLease.Run(ctx, l.r.rdb, []string{l.key}, l.token, l.r.cfg.ConsumerLease.Milliseconds()).Int()
		switch {
		case err != nil && ctx.Err() == nil:
			l.r.tel.Logger.WarnContext(ctx, "renewing the consumer lease failed", "stage", l.r.stage.Name,
				"consumer", l.r.cfg.Consumer, "error", err)
		case err == nil && n == 0:
			l.r.tel.Logger.ErrorContext(ctx, "consumer name taken over by another copy; stopping", "stage", l.r.stage.Name,
				"consumer", l.r.cfg.Consumer)
			return true
		}
	}
}

// release gives the lease up, if still held.
func (l *consumerLease) release(ctx context.Context) {
	if err := releaseLease.Run(ctx, l.r.rdb, []string{l.key}, l.token).Err(); err != nil {
		l.r.tel.Logger.WarnContext(ctx, "releasing the consumer lease failed", "stage", l.r.stage.Name,
			"consumer", l.r.cfg.Consumer, "error", err)
	}
}

// sweepEvery is how often idle consumers are looked for.
func (c RunnerConfig) sweepEvery() time.Duration { return min(c.ConsumerIdle/2, time.Minute) }

// sweepConsumers deletes, until ctx ends, the group's consumers on the
// runner's partitions that have nothing pending and were idle for
// ConsumerIdle.
func (r *Runner) sweepConsumers(ctx context.Context) {
	t := time.NewTicker(r.cfg.sweepEvery())
	defer t.Stop()
	for {
		for _, p := range r.cfg.Partitions {
			r.sweepPartition(ctx, r.stage.Topic.Stream(p))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (r *Runner) sweepPartition(ctx context.Context, stream string) {
	cs, err := r.rdb.XInfoConsumers(ctx, stream, r.cfg.Group).Result()
	if err != nil {
		if ctx.Err() == nil {
			r.tel.Logger.WarnContext(ctx, "listing consumers failed", "stage", r.stage.Name, "stream", stream, "error", err)
		}
		return
	}
	deleted := 0
	for _, c := range cs {
		// An unknown idle time (negative, on an embedded Redis) is not idle.
		if c.Name == r.cfg.Consumer || c.Pending > 0 || c.Idle < r.cfg.ConsumerIdle {
			continue
		}
		ok, err := r.deleteConsumer(ctx, stream, c.Name, r.cfg.ConsumerIdle)
		if err != nil {
			r.tel.Logger.WarnContext(ctx, "deleting an idle consumer failed", "stage", r.stage.Name, "stream", stream,
				"consumer", c.Name, "error", err)
			return
		}
		if ok {
			deleted++
		}
	}
	if deleted > 0 {
		r.tel.Logger.InfoContext(ctx, "deleted idle consumers with nothing pending", "stage", r.stage.Name,
			"stream", stream, "count", deleted)
	}
}

// deleteConsumer deletes a consumer of the group on stream if it has
// nothing pending and was idle for minIdle; it reports whether it did.
func (r *Runner) deleteConsumer(ctx context.Context, stream, consumer string, minIdle time.Duration) (bool, error) {
	n, err := deleteIdleConsumer.Run(ctx, r.rdb, []string{stream}, r.cfg.Group, consumer, minIdle.Milliseconds()).Int()
	return n == 1, err
}

// retire deletes the runner's own consumer on every partition where it has
// nothing pending, at a graceful stop.
func (r *Runner) retire(ctx context.Context) {
	for _, p := range r.cfg.Partitions {
		if _, err := r.deleteConsumer(ctx, r.stage.Topic.Stream(p), r.cfg.Consumer, 0); err != nil {
			r.tel.Logger.WarnContext(ctx, "deleting the stopped consumer failed", "stage", r.stage.Name,
				"stream", r.stage.Topic.Stream(p), "consumer", r.cfg.Consumer, "error", err)
		}
	}
}
