package notifier

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/clip"
)

// scriptCall is one call of a Lua script in a pipeline.
type scriptCall struct {
	keys []string
	args []any
}

// evalAll runs script once per call in one pipeline (EVALSHA). Calls that
// find the script missing (a restarted or flushed Redis, a new cluster
// node) did nothing, so they run again by EVAL, which loads it, in a
// second pipeline. Each call is as atomic as a lone script call.
func evalAll(ctx context.Context, rdb redis.UniversalClient, script *redis.Script, calls []scriptCall) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(calls))
	if len(calls) == 0 {
		return cmds
	}
	pipe := rdb.Pipeline()
	for i, c := range calls {
		cmds[i] = script.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx)
	var again []int
	for i, c := range cmds {
		if redis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		pipe = rdb.Pipeline()
		for _, i := range again {
			cmds[i] = script.Eval(ctx, pipe, calls[i].keys, calls[i].args...)
		}
		_, _ = pipe.Exec(ctx)
	}
	return cmds
}

// claimAll is claim for many records in few round trips: it fills each
// record's token, state and start and tries to take each lease, with the
// per-key atomicity of claimScript. A first pipeline takes the leases of
// keys without a record by SET NX (the common case, no script); the keys
// that hold one go through claimScript in a second pipeline, which decides
// on their record. It returns each key's result or error.
func (l *DeliveryLedger) claimAll(ctx context.Context, keys []string, recs []*DeliveryRecord) ([]claimResult, []error) {
	res := make([]claimResult, len(keys))
	errs := make([]error, len(keys))
	var toks []byte
	if n := 12 * len(keys); n > 0 {
		toks = make([]byte, n)
		if _, err := rand.Read(toks); err != nil {
			for i := range errs {
				errs[i] = fmt.Errorf("notifier: delivery token: %w", err)
			}
			return res, errs
		}
	}
	now := time.Now().UTC()
	bodies := make([][]byte, len(keys))
	sets := make([]*redis.BoolCmd, len(keys))
	pipe := l.rdb.Pipeline()
	for i, key := range keys {
		if len(key) > maxDeliveryKeyBytes {
			errs[i] = fmt.Errorf("notifier: delivery key longer than %d bytes", maxDeliveryKeyBytes)
			continue
		}
		rec := recs[i]
		rec.Token, rec.State, rec.StartedAt = hex.EncodeToString(toks[12*i:12*i+12]), DeliverySending, now
		body, err := json.Marshal(rec)
		if err != nil {
			errs[i] = fmt.Errorf("notifier: encode delivery record: %w", err)
			continue
		}
		bodies[i], sets[i] = body, pipe.SetNX(ctx, key, body, l.cfg.Lease)
	}
	if pipe.Len() > 0 {
		_, _ = pipe.Exec(ctx)
	}
	lease := l.cfg.Lease.Milliseconds()
	var calls []scriptCall
	var idx []int
	for i, c := range sets {
		switch {
		case c == nil:
		case c.Err() != nil:
			errs[i] = fmt.Errorf("notifier: claim delivery %s: %w", keys[i], c.Err())
		case c.Val():
			res[i] = claimed
		default:
			calls = append(calls, scriptCall{keys: []string{keys[i]}, args: []any{bodies[i], lease, recs[i].MessageID}})
			idx = append(idx, i)
		}
	}
	for j, c := range evalAll(ctx, l.rdb, claimScript, calls) {
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

// settleAll settles every op in one round trip (sent records by SET,
// rejections and releases by settleScript) and returns each op's error.
func (l *DeliveryLedger) settleAll(ctx context.Context, ops []settleOp) []error {
	errs := make([]error, len(ops))
	if len(ops) == 0 {
		return errs
	}
	ttl := strconv.FormatInt(l.cfg.TTL.Milliseconds(), 10)
	pipe := l.rdb.Pipeline()
	sets := make([]*redis.StatusCmd, len(ops))
	var calls []scriptCall
	var idx []int
	now := time.Now().UTC()
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
			if body, err = json.Marshal(rec); err != nil {
				errs[i] = fmt.Errorf("notifier: encode delivery record: %w", err)
				continue
			}
		}
		if op.kind == settleSent {
			sets[i] = pipe.Set(ctx, op.key, body, l.cfg.TTL)
			continue
		}
		calls = append(calls, scriptCall{keys: []string{op.key}, args: []any{rec.Token, body, ttl}})
		idx = append(idx, i)
	}
	evals := make([]*redis.Cmd, len(calls))
	for j, c := range calls {
		evals[j] = settleScript.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx)
	var again []scriptCall
	var againIdx []int
	for j, c := range evals {
		if redis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
			again, againIdx = append(again, calls[j]), append(againIdx, j)
		}
	}
	for k, c := range evalAll(ctx, l.rdb, settleScript, again) {
		evals[againIdx[k]] = c
	}
	for i, c := range sets {
		if c != nil && c.Err() != nil {
			errs[i] = fmt.Errorf("notifier: record delivery %s: %w", ops[i].key, c.Err())
		}
	}
	for j, c := range evals {
		if err := c.Err(); err != nil {
			errs[idx[j]] = fmt.Errorf("notifier: settle delivery %s: %w", ops[idx[j]].key, err)
		}
	}
	return errs
}
