package stream

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/respconn"
	"github.com/dropstream/dropstream/internal/script"
)

// Direct reads. On one server (not a cluster, whose replies may send a
// read to another node), each partition reads new entries through a
// connection of its own (respconn) rather than through go-redis: the
// reply's bytes land once in a buffer the connection keeps, where
// go-redis would copy them into a slice regrown dozens of times per batch.
// The queued acks go in the same round trip, as they do through go-redis.
// A connection that fails is closed and dialled again on the next read;
// until then the runner's usual backoff applies. It is dialled with the
// read client's options, dialer included: through a Sentinel failover
// client's dialer it reaches the primary the Sentinels name, so after a
// failover (the old primary gone, or answering READONLY as a replica) the
// next dial reaches the promoted one.

// directOptions returns the options to dial direct reads with, nil when
// reads must go through go-redis.
func directOptions(reads redis.UniversalClient) *redis.Options {
	c, ok := reads.(*redis.Client)
	if !ok || !respconn.Supported(c.Options()) {
		return nil
	}
	return c.Options()
}

// readDirect is read through the partition's own connection.
func (r *Runner) readDirect(ctx context.Context, st *partitionState, block time.Duration) ([]*Message, error) {
	if st.conn == nil {
		c, err := respconn.Dial(ctx, r.direct)
		if err != nil {
			return nil, err
		}
		st.conn = c
	}
	count := st.size.count(r.cfg)
	read := []any{"xreadgroup", "group", r.cfg.Group, r.cfg.Consumer,
		"count", count, "block", block.Milliseconds(), "streams", st.stream, ">"}
	cmds := [][]any{read}
	acking := st.acks.len() > 0
	var ack script.Call
	if acking {
		ack = r.ackCall(st.p, &st.acks)
		cmds = [][]any{ackScript.EvalSha(ack), read}
	}
	replies, err := st.conn.Do(ctx, cmds...)
	if err != nil {
		st.closeConn()
		if acking {
			r.ackFailed(ctx, st, err)
		}
		return nil, err
	}
	if acking {
		err := respconn.ReplyError(replies[0])
		if script.IsNoScript(err) {
			err = ackScript.Run(ctx, r.rdb, ack.Keys, ack.Args...).Err()
		}
		r.ackFailed(ctx, st, err)
	}
	raw := replies[len(replies)-1]
	msgs, err := parseReadReply(raw, st.stream, st.p, &st.entries)
	if staleServer(err) {
		st.closeConn()
	}
	st.size.took(len(raw), msgs, count)
	return msgs, err
}

// staleServer reports whether err says the connection reached a server
// that can no longer take the read: a replica (READONLY), as the server
// an address named becomes after a failover. Like go-redis, the runner
// then dials again, which may reach the new master.
func staleServer(err error) bool {
	var re respconn.Error
	return errors.As(err, &re) && strings.HasPrefix(string(re), "READONLY ")
}

// closeConn closes the partition's direct connection, if it has one.
func (st *partitionState) closeConn() {
	if st.conn != nil {
		_ = st.conn.Close()
		st.conn = nil
	}
}
