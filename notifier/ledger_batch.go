package notifier

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	gojson "github.com/goccy/go-json"
	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/internal/script"
)

// claimAll claims many keys in two pipelines: SET NX for keys without a
// record, then claimScript for the rest. resume[i] may take back a lease
// its message left. It returns each key's result or error.
func (l *DeliveryLedger) claimAll(ctx context.Context, keys []string, recs []DeliveryRecord, resume []bool) ([]claimResult, []error) {
	res := make([]claimResult, len(keys))
	errs := make([]error, len(keys))
	toks := make([]byte, 12*len(keys))
	_, _ = rand.Read(toks)              // never fails (crypto/rand)
	hexToks := hex.EncodeToString(toks) // one string for every token
	now := time.Now().UTC()
	bodies := make([][]byte, len(keys))
	sets := make([]*redis.BoolCmd, len(keys))
	args := make([]any, 0, 6*len(keys)) // the SETs' arguments
	pipe := l.rdb.Pipeline()
	for i, key := range keys {
		if len(key) > maxDeliveryKeyBytes {
			errs[i] = fmt.Errorf("notifier: delivery key longer than %d bytes", maxDeliveryKeyBytes)
			continue
		}
		rec := &recs[i]
		rec.Token, rec.State, rec.StartedAt = hexToks[24*i:24*i+24], DeliverySending, now
		body, err := gojson.Marshal(rec)
		if err != nil {
			errs[i] = fmt.Errorf("notifier: encode delivery record: %w", err)
			continue
		}
		bodies[i] = body
		n := len(args)
		args = append(args, "set", key, body, "px", l.leaseMs, "nx")
		sets[i] = redis.NewBoolCmd(ctx, args[n:len(args):len(args)]...)
		_ = pipe.Process(ctx, sets[i])
	}
	if pipe.Len() > 0 {
		_, _ = pipe.Exec(ctx)
	}
	lease := l.cfg.Lease.Milliseconds()
	var calls []script.Call
	var idx []int
	for i, c := range sets {
		switch {
		case c == nil:
		case c.Err() != nil:
			errs[i] = fmt.Errorf("notifier: claim delivery %s: %w", keys[i], c.Err())
		case c.Val():
			res[i] = claimed
		default:
			again := "0"
			if resume != nil && resume[i] {
				again = "1"
			}
			calls = append(calls, script.Call{Keys: []string{keys[i]}, Args: []any{bodies[i], lease, recs[i].MessageID, again}})
			idx = append(idx, i)
		}
	}
	cmds, _ := claimScript.RunAll(ctx, l.rdb, calls) // a failed load is each retried command's error
	for j, c := range cmds {
		i := idx[j]
		s, err := c.Text()
		if err != nil {
			errs[i] = fmt.Errorf("notifier: claim delivery %s: %w", keys[i], err)
			continue
		}
		res[i] = claimResult(s)
	}
	return res, errs
}

// settleKind is what becomes of a claimed record after its send.
type settleKind int

const (
	settleSent    settleKind = iota // recorded as sent for TTL, whoever holds the lease
	settleReject                    // recorded as rejected, under the caller's claim
	settleRelease                   // deleted, under the caller's claim, so a retry may send
)

// settleOp settles one claimed record.
type settleOp struct {
	key    string
	rec    DeliveryRecord
	kind   settleKind
	reason error // of a rejection
}

// queuedSettles are the commands of settles queued in a pipeline.
type queuedSettles struct {
	ops   []settleOp
	errs  []error
	sets  []*redis.StatusCmd
	calls []script.Call
	idx   []int // op of each call
	evals []*redis.Cmd
}

// queueSettles adds ops' settles to pipe; settled returns their errors.
func (l *DeliveryLedger) queueSettles(ctx context.Context, pipe redis.Pipeliner, ops []settleOp) *queuedSettles {
	q := &queuedSettles{ops: ops, errs: make([]error, len(ops)), sets: make([]*redis.StatusCmd, len(ops))}
	ttl := strconv.FormatInt(l.cfg.TTL.Milliseconds(), 10)
	now := time.Now().UTC()
	args := make([]any, 0, 5*len(ops)) // the SETs' arguments
	for i, op := range ops {
		rec := op.rec
		switch op.kind {
		case settleSent:
			rec.State, rec.SentAt = DeliverySent, now
		case settleReject:
			rec.State, rec.Error = DeliveryRejected, clip.String(op.reason.Error(), maxReason)
		}
		var body []byte
		if op.kind != settleRelease {
			var err error
			if body, err = gojson.Marshal(rec); err != nil {
				q.errs[i] = fmt.Errorf("notifier: encode delivery record: %w", err)
				continue
			}
		}
		if op.kind == settleSent {
			n := len(args)
			args = append(args, "set", op.key, body, "px", l.ttlMs)
			q.sets[i] = redis.NewStatusCmd(ctx, args[n:len(args):len(args)]...)
			_ = pipe.Process(ctx, q.sets[i])
			continue
		}
		q.calls = append(q.calls, script.Call{Keys: []string{op.key}, Args: []any{rec.Token, body, ttl}})
		q.idx = append(q.idx, i)
	}
	q.evals = settleScript.Queue(ctx, pipe, q.calls)
	return q
}

// settled retries settles that found the script missing.
func (l *DeliveryLedger) settled(ctx context.Context, q *queuedSettles) []error {
	_ = settleScript.Retry(ctx, l.rdb, q.evals) // a failed load is each retried command's error
	for i, c := range q.sets {
		if c != nil && c.Err() != nil {
			q.errs[i] = fmt.Errorf("notifier: record delivery %s: %w", q.ops[i].key, c.Err())
		}
	}
	for j, c := range q.evals {
		if err := c.Err(); err != nil {
			q.errs[q.idx[j]] = fmt.Errorf("notifier: settle delivery %s: %w", q.ops[q.idx[j]].key, err)
		}
	}
	return q.errs
}
