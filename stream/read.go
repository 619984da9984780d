package stream

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// read runs XREADGROUP from id (">" for new entries, an ID for this
// consumer's own pending entries after it). block < 0 means no BLOCK.
func (r *Runner) read(ctx context.Context, st *partitionState, id string, block time.Duration) ([]*Message, error) {
	res, err := r.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
		Group:    r.cfg.Group,
		Consumer: r.cfg.Consumer,
		Streams:  []string{st.stream, id},
		Count:    int64(r.cfg.BatchSize),
		Block:    block,
	}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var msgs []*Message
	for _, s := range res {
		msgs = make([]*Message, 0, len(s.Messages))
		for _, x := range s.Messages {
			msgs = append(msgs, decodeMessage(st.stream, st.p, x.ID, x.Values))
		}
	}
	return msgs, nil
}

// claim takes over one page of entries idle for ClaimIdle, from any
// consumer of the group, including this one.
func (r *Runner) claim(ctx context.Context, st *partitionState) ([]*Message, error) {
	xs, cursor, err := r.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
		Stream:   st.stream,
		Group:    r.cfg.Group,
		Consumer: r.cfg.Consumer,
		MinIdle:  r.cfg.ClaimIdle,
		Start:    st.claimFrom,
		Count:    int64(r.cfg.BatchSize),
	}).Result()
	if err != nil {
		return nil, err
	}
	st.claimFrom = cursor
	if cursor == "0-0" || cursor == "" {
		st.claimFrom = "0-0"
		st.nextClaim = time.Now().Add(r.cfg.ClaimInterval)
	}
	msgs := make([]*Message, 0, len(xs))
	for _, x := range xs {
		msgs = append(msgs, decodeMessage(st.stream, st.p, x.ID, x.Values))
	}
	if len(msgs) == 0 {
		return nil, nil
	}
	r.tel.Logger.InfoContext(ctx, "claimed stale messages", "stage", r.stage.Name, "stream", st.stream, "count", len(msgs))
	return msgs, r.loadAttempts(ctx, st.stream, msgs)
}

// loadAttempts sets Attempt of redelivered messages from the group's
// delivery counters.
func (r *Runner) loadAttempts(ctx context.Context, stream string, msgs []*Message) error {
	pend, err := r.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{
		Stream:   stream,
		Group:    r.cfg.Group,
		Start:    msgs[0].ID,
		End:      msgs[len(msgs)-1].ID,
		Count:    int64(len(msgs)),
		Consumer: r.cfg.Consumer,
	}).Result()
	if err != nil {
		return err
	}
	counts := make(map[string]int64, len(pend))
	for _, p := range pend {
		counts[p.ID] = p.RetryCount
	}
	for _, m := range msgs {
		if n := counts[m.ID]; n > 0 {
			m.Attempt = int(n)
		}
	}
	return nil
}
