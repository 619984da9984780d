package stream

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/script"
)

// Redelivery. A message delivered before (own pending entries after a
// restart, or any copy's idle for ClaimIdle) is handled alone, claimed with
// XCLAIM just before, so one that crashes the process raises only its own
// delivery count. A group's redeliveries in a process go one at a time.
var redeliveryLocks sync.Map // topic "/" group -> chan struct{} (capacity 1)

// redeliveryLock returns the lock of the runner's group.
func (r *Runner) redeliveryLock() chan struct{} {
	l, _ := redeliveryLocks.LoadOrStore(r.stage.Topic.String()+"/"+r.cfg.Group, make(chan struct{}, 1))
	return l.(chan struct{})
}

// pendingEntry is an entry to redeliver with its delivery count so far and
// the idle time it must still have when it is claimed.
type pendingEntry struct {
	id      string
	count   int64
	minIdle time.Duration
}

// read acknowledges the queued acks and reads new entries, waiting up to
// block, in one round trip. Two paths: the reply is decoded raw
// (parseReadReply), four allocations per entry instead of go-redis's dozen;
// go-redis's typed XReadGroup takes a read blocking too long for the
// client's read deadline, which only it extends, and a redirect or READONLY
// reply, which only it follows.
func (r *Runner) read(ctx context.Context, st *partitionState, block time.Duration) ([]*Message, error) {
	if !rawReadFits(r.reads, block) {
		r.flushAcks(ctx, st)
		return r.readTyped(ctx, st, block)
	}
	count := st.size.count(r.cfg)
	cmd := redis.NewRawCmd(ctx, "xreadgroup", "group", r.cfg.Group, r.cfg.Consumer,
		"count", count, "block", block.Milliseconds(), "streams", st.stream, ">")
	cmd.SetFirstKeyPos(9)
	if st.acks.len() > 0 {
		pipe := r.reads.Pipeline()
		calls := []script.Call{r.ackCall(st.p, &st.acks)}
		acks := ackScript.Queue(ctx, pipe, calls)
		_ = pipe.Process(ctx, cmd)
		_, _ = pipe.Exec(ctx)
		err := ackScript.Retry(ctx, r.rdb, acks)
		if err == nil {
			err = acks[0].Err()
		}
		r.ackFailed(ctx, st.stream, &st.acks, err)
	} else {
		_ = r.reads.Process(ctx, cmd)
	}
	raw, err := cmd.Result()
	if err != nil {
		return nil, err
	}
	msgs, err := parseReadReply(raw, st.stream, st.p, &st.entries)
	if redirected(err) {
		return r.readTyped(ctx, st, block)
	}
	st.size.took(len(raw), msgs, count)
	return msgs, err
}

// readTyped is read through go-redis's XReadGroup, without the acks.
func (r *Runner) readTyped(ctx context.Context, st *partitionState, block time.Duration) ([]*Message, error) {
	count := st.size.count(r.cfg)
	res, err := r.reads.XReadGroup(ctx, &redis.XReadGroupArgs{
		Group:    r.cfg.Group,
		Consumer: r.cfg.Consumer,
		Streams:  []string{st.stream, ">"},
		Count:    int64(count),
		Block:    block,
	}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var msgs []*Message
	size := 0
	for _, s := range res {
		msgs = make([]*Message, 0, len(s.Messages))
		for _, x := range s.Messages {
			msgs = append(msgs, decodeMessage(st.stream, st.p, x.ID, x.Values))
			size += replyBytes(x)
		}
	}
	st.size.took(size, msgs, count)
	return msgs, nil
}

// replyBytes is about what entry x took in a RESP2 reply: its ID and
// fields, each with its few bytes of framing.
func replyBytes(x redis.XMessage) int {
	n := 16 + len(x.ID)
	for k, v := range x.Values {
		s, _ := v.(string)
		n += 16 + len(k) + len(s)
	}
	return n
}

// queuePending queues for redelivery a page from from of the group's
// pending entries idle for idle, of consumer ("" for any). It returns where
// the next page starts, "" after the last, and the page's length.
func (r *Runner) queuePending(ctx context.Context, st *partitionState, consumer string, idle time.Duration, from string) (string, int, error) {
	pend, err := r.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{
		Stream: st.stream, Group: r.cfg.Group, Consumer: consumer, Idle: idle,
		Start: from, End: "+", Count: int64(r.cfg.BatchSize),
	}).Result()
	for _, p := range pend {
		st.redeliver = append(st.redeliver, pendingEntry{id: p.ID, count: p.RetryCount, minIdle: idle})
	}
	if err != nil || len(pend) < r.cfg.BatchSize {
		return "", len(pend), err
	}
	return nextID(pend[len(pend)-1].ID), len(pend), nil
}

// claim queues one page of entries idle for ClaimIdle, of any consumer of
// the group including this one.
func (r *Runner) claim(ctx context.Context, st *partitionState) error {
	next, n, err := r.queuePending(ctx, st, "", r.cfg.ClaimIdle, st.claimFrom)
	if err != nil {
		return err
	}
	st.claimFrom = cmp.Or(next, "-")
	if next == "" {
		st.nextClaim = time.Now().Add(r.cfg.ClaimInterval)
	}
	if n > 0 {
		r.tel.Logger.InfoContext(ctx, "claiming stale messages", "stage", r.stage.Name, "stream", st.stream, "count", n)
	}
	return nil
}

// redeliverOne claims the first queued entry, counting its delivery, and
// handles it, holding its group's redelivery lock throughout. It returns
// without doing anything when stop ends while it waits for the lock.
func (r *Runner) redeliverOne(stop, work, io context.Context, st *partitionState) error {
	lock := r.redeliveryLock()
	select {
	case lock <- struct{}{}:
	case <-stop.Done():
		return nil
	}
	defer func() { <-lock }()
	e := st.redeliver[0]
	xs, err := r.rdb.XClaim(io, &redis.XClaimArgs{
		Stream: st.stream, Group: r.cfg.Group, Consumer: r.cfg.Consumer, Messages: []string{e.id}, MinIdle: e.minIdle,
	}).Result()
	if err != nil {
		return err
	}
	st.redeliver = st.redeliver[1:]
	switch {
	case len(xs) == 0: // acknowledged or claimed by another copy meanwhile
	case len(xs[0].Values) == 0: // deleted from the stream while pending: nothing left to handle
		st.acks.add(ackDeleted, e.id)
	default:
		m := decodeMessage(st.stream, st.p, xs[0].ID, xs[0].Values)
		m.Attempt += int(e.count) // deliveries of this entry so far, after those before it was parked
		r.process(work, io, st, []*Message{m})
	}
	r.flushAcks(io, st)
	return nil
}
