package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/rediskey"
	"github.com/dropstream/dropstream/internal/script"
	"github.com/dropstream/dropstream/internal/tick"
)

// Consumer names. A copy holds its consumer name by a lease, renewed every
// ConsumerLease/3; a starting copy takes it over. A copy reads only while a
// renewal sent less than ConsumerLease ago answered, and stops, batch in
// hand finished, while another copy holds the name. Consumers idle for
// ConsumerIdle with nothing pending are deleted, and a stopping copy's own.

// ErrConsumerTaken is wrapped by LeaseErr while another live copy holds
// the runner's consumer name.
var ErrConsumerTaken = errors.New("stream: consumer name held by another copy")

// Replies of renewLease.
const (
	leaseOther   = 0 // another copy holds the lease
	leaseRenewed = 1 // ours, extended
	leaseRetaken = 2 // was gone (expired), taken again
)

var (
	// renewLease extends lease KEYS[1] by ARGV[2] ms if it holds token ARGV[1],
	// or sets it if gone; see the leaseX replies.
	renewLease = script.New(`
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if not v then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 2
end
return 0`)
	// releaseLease deletes the lease KEYS[1] if it holds the token ARGV[1].
	releaseLease = script.New(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)
	// deleteIdleConsumer deletes consumer ARGV[2] of group ARGV[1] on stream
	// KEYS[1] if nothing is pending to it and it was idle ARGV[3] ms (any time
	// for 0: miniredis reports -1 for consumers that only read); 1 if deleted.
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

	mu      sync.Mutex
	until   time.Time     // the lease is ours at least until then (monotonic)
	other   bool          // the last renewal found another copy's token
	gen     int           // times the name came back from another copy
	waiting int           // partition loops waiting for a confirmation
	renewed chan struct{} // closed at the next confirmation
}

// acquireLease takes the lease on the consumer name, from whoever holds it.
func (r *Runner) acquireLease(ctx context.Context) (*consumerLease, error) {
	key := rediskey.Key(r.stage.Topic.HashTag(0), "consumer", r.stage.Topic.Name, r.cfg.Group, r.cfg.Consumer)
	l := &consumerLease{r: r, key: key, token: DefaultConsumerName(), renewed: make(chan struct{})}
	sent := time.Now()
	prev, err := r.rdb.SetArgs(ctx, l.key, l.token, redis.SetArgs{TTL: r.cfg.ConsumerLease, Get: true}).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("lease on consumer %s: %w", r.cfg.Consumer, err)
	}
	if prev != "" {
		r.tel.Logger.WarnContext(ctx, "consumer name taken over from a live copy", "stage", r.stage.Name, "consumer", r.cfg.Consumer)
	}
	l.confirm(sent)
	return l, nil
}

// confirm records that the lease was ours when a request sent at sent
// reached Redis and wakes the waiting loops; it reports whether the lease
// had lapsed and whether the name came back from another copy.
func (l *consumerLease) confirm(sent time.Time) (lapsed, back bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lapsed = !l.until.IsZero() && !l.other && sent.After(l.until)
	back = l.other
	if back {
		l.other = false
		l.gen++
	}
	l.until = sent.Add(l.r.cfg.ConsumerLease)
	close(l.renewed)
	l.renewed = make(chan struct{})
	return lapsed, back
}

// lose records that another copy holds the name; it reports whether that
// is news.
func (l *consumerLease) lose() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	news := !l.other
	l.other, l.until = true, time.Time{}
	return news
}

// readable reports whether the copy may read now, and the generation of
// its hold on the name; when it may not, wake is closed at the next
// confirmation.
func (l *consumerLease) readable() (ok bool, gen int, wake <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.other && time.Now().Before(l.until) {
		return true, l.gen, nil
	}
	return false, l.gen, l.renewed
}

// wait notes a partition loop waiting for a confirmation, out of n; it
// reports whether another copy holds the name and every loop now waits.
// The returned func notes it leaving.
func (l *consumerLease) wait(n int) (standing bool, leave func()) {
	return enter(&l.mu, &l.waiting, func() bool { return l.other && l.waiting == n })
}

// standing reports whether another copy holds the name and every one of
// the copy's n partition loops has stopped reading.
func (l *consumerLease) standing(n int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.other && l.waiting == n
}

// hold renews the lease every ConsumerLease/3 until ctx ends, taking it
// again when it expired, and notes when another copy holds it. Renewal
// errors are logged and retried; they leave the lease to lapse.
func (l *consumerLease) hold(ctx context.Context) {
	log := l.r.tel.Logger
	tick.EveryAfter(ctx, l.r.cfg.ConsumerLease/3, func() {
		sent := time.Now()
		n, err := renewLease.Run(ctx, l.r.rdb, []string{l.key}, l.token, l.r.cfg.ConsumerLease.Milliseconds()).Int()
		attrs := []any{"stage", l.r.stage.Name, "consumer", l.r.cfg.Consumer}
		switch {
		case err != nil:
			if ctx.Err() == nil {
				log.WarnContext(ctx, "renewing the consumer lease failed", append(attrs, "error", err)...)
			}
		case n == leaseOther:
			if l.lose() {
				log.WarnContext(ctx, "consumer name held by another copy; this copy stops reading until the name is free", attrs...)
			}
		default:
			lapsed, back := l.confirm(sent)
			switch {
			case back:
				log.InfoContext(ctx, "consumer name free again; this copy reads again", attrs...)
			case n == leaseRetaken:
				log.WarnContext(ctx, "consumer lease had expired with no other holder (the process stalled or Redis was unreachable); taken again", attrs...)
			case lapsed:
				log.WarnContext(ctx, "consumer lease was unconfirmed for longer than the lease; reading resumes", attrs...)
			}
		}
	})
}

// release gives the lease up, if still held.
func (l *consumerLease) release(ctx context.Context) {
	if err := releaseLease.Run(ctx, l.r.rdb, []string{l.key}, l.token).Err(); err != nil {
		l.r.tel.Logger.WarnContext(ctx, "releasing the consumer lease failed", "stage", l.r.stage.Name,
			"consumer", l.r.cfg.Consumer, "error", err)
	}
}

// LeaseErr wraps ErrConsumerTaken once another live copy holds this copy's
// consumer name and every partition of this copy has stopped reading.
func (r *Runner) LeaseErr() error {
	if l := r.lease.Load(); l != nil && l.standing(len(r.cfg.Partitions)) {
		return fmt.Errorf("stage %s consumer %s: %w", r.stage.Name, r.cfg.Consumer, ErrConsumerTaken)
	}
	return nil
}

// holdWhileUnleased returns false while the lease is confirmed; otherwise it
// acknowledges what the partition handled, waits for a confirmation or stop
// and returns true. A name back from another copy has its own pending
// entries looked at again first.
func (r *Runner) holdWhileUnleased(stop, io context.Context, st *partitionState) bool {
	l := r.lease.Load()
	ok, gen, wake := l.readable()
	if gen != st.leaseGen {
		st.leaseGen, st.ownFrom, st.redeliver = gen, "-", nil
	}
	if !ok {
		r.idle(stop, io, st, wake, l.wait, slog.LevelWarn, "every partition stopped reading: the consumer name is held by another copy")
	}
	return !ok
}

// sweepConsumers deletes, every ConsumerIdle/2 (at most a minute) until ctx
// ends, the group's consumers on the runner's partitions that have nothing
// pending and were idle for ConsumerIdle.
func (r *Runner) sweepConsumers(ctx context.Context) {
	tick.Every(ctx, min(r.cfg.ConsumerIdle/2, time.Minute), func() {
		for _, p := range r.cfg.Partitions {
			r.sweepPartition(ctx, r.stage.Topic.Stream(p))
		}
	})
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

// idle acknowledges what the partition handled and waits for wake or stop,
// counted in by enter; msg is logged at level once every loop waits.
func (r *Runner) idle(stop, io context.Context, st *partitionState, wake <-chan struct{}, enter func(n int) (bool, func()), level slog.Level, msg string) {
	r.flushAcks(io, st)
	all, leave := enter(len(r.cfg.Partitions))
	defer leave()
	if all {
		r.tel.Logger.Log(io, level, msg, "stage", r.stage.Name, "consumer", r.cfg.Consumer)
	}
	select {
	case <-wake:
	case <-stop.Done():
	}
}
