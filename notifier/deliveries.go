package notifier

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	gojson "github.com/goccy/go-json"
	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/internal/script"
	"github.com/dropstream/dropstream/internal/settings"
	"github.com/dropstream/dropstream/stream"
)

// DeliveryState is the state of a delivery record.
type DeliveryState string

// Delivery states.
const (
	// DeliverySending: a copy holds the lease; it expires, so a crash frees it.
	DeliverySending DeliveryState = "sending"
	// DeliverySent: accepted; never sent again while the record lives.
	DeliverySent DeliveryState = "sent"
	// DeliveryRejected: refused for good for message MessageID; another
	// message (a replayed dead letter, say) tries again.
	DeliveryRejected DeliveryState = "rejected"
)

// DeliveryRecord is the ledger's record of one notification's delivery.
type DeliveryRecord struct {
	State       DeliveryState `json:"state"`
	Flow        string        `json:"flow"`
	Channel     string        `json:"channel"`
	RecipientID string        `json:"recipient_id"`
	EventID     string        `json:"event_id"`
	SessionID   string        `json:"session_id,omitempty"`
	Subject     string        `json:"subject,omitempty"`
	TraceID     string        `json:"trace_id,omitempty"`
	// MessageID and Attempt name the delivery that wrote the record.
	MessageID string `json:"message_id"`
	Attempt   int    `json:"attempt"`
	// Token is random per claim: only its holder may release the lease.
	Token     string    `json:"token"`
	StartedAt time.Time `json:"started_at"`
	SentAt    time.Time `json:"sent_at,omitzero"`
	// Error is the reason of a rejection.
	Error string `json:"error,omitempty"`
}

// DefaultLedgerName is DeliveryLedgerConfig.Name's default.
const DefaultLedgerName = "notifier"

// maxDeliveryKeyBytes bounds a ledger key.
const maxDeliveryKeyBytes = 512

// DeliveryLedgerConfig configures a DeliveryLedger; zero fields take defaults.
type DeliveryLedgerConfig struct {
	// Name scopes the ledger keys (stream.LedgerConfig.Name). Default "notifier".
	Name string `default:"notifier"`
	// TTL keeps sent and rejected records; it must outlive every redelivery
	// and replay, or the replay sends again. Default 30 days.
	TTL time.Duration `default:"720h"`
	// Lease is how long a "sending" claim lasts: above the longest send and
	// below the runner's ClaimIdle. Default 1 minute.
	Lease time.Duration `default:"1m"`
}

// WithDefaults returns c with every zero field set to its default.
func (c DeliveryLedgerConfig) WithDefaults() DeliveryLedgerConfig {
	settings.Defaults(&c)
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c DeliveryLedgerConfig) Validate() error {
	var errs []error
	if err := (stream.LedgerConfig{Name: c.Name, TTL: c.TTL}).Validate(); err != nil {
		errs = append(errs, fmt.Errorf("notifier: delivery ledger: %w", err))
	}
	if c.Lease < time.Second || c.Lease >= c.TTL {
		errs = append(errs, fmt.Errorf("notifier: send lease %s: want at least 1s and below the ttl %s", c.Lease, c.TTL))
	}
	return errors.Join(errs...)
}

// DeliveryLedger sends a notification once per business key under
// at-least-once delivery: a claim writes a "sending" record with a lease, a
// send turns it "sent" for TTL, a failure releases it. Keys are
// stream.Ledger keys, in the partition's slot.
type DeliveryLedger struct {
	rdb    redis.UniversalClient
	ledger *stream.Ledger
	cfg    DeliveryLedgerConfig
	// cfg.TTL and cfg.Lease in milliseconds, boxed once
	ttlMs, leaseMs any
}

// NewDeliveryLedger returns a delivery ledger over rdb.
func NewDeliveryLedger(rdb redis.UniversalClient, cfg DeliveryLedgerConfig) (*DeliveryLedger, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l, err := stream.NewLedger(rdb, stream.LedgerConfig{Name: cfg.Name, TTL: cfg.TTL})
	if err != nil {
		return nil, fmt.Errorf("notifier: delivery ledger: %w", err)
	}
	return &DeliveryLedger{rdb: rdb, ledger: l, cfg: cfg, ttlMs: cfg.TTL.Milliseconds(), leaseMs: cfg.Lease.Milliseconds()}, nil
}

// Key returns the Redis key of a business key in the slot of hashTag.
func (l *DeliveryLedger) Key(hashTag, businessKey string) string {
	return l.ledger.Key(hashTag, businessKey)
}

// claimResult says what a claim found.
type claimResult string

const (
	claimed       claimResult = "claimed"  // the caller holds the lease and sends
	claimSent     claimResult = "sent"     // already delivered
	claimBusy     claimResult = "busy"     // another holder's lease is live
	claimRejected claimResult = "rejected" // refused for this very message
	claimResumed  claimResult = "resumed"  // taken back from this message's stopped delivery
)

// claimScript takes the lease unless a record forbids it; a non-record
// value counts as sent. A redelivery (ARGV[4] "1") of the message holding
// the lease takes it back: one copy holds a message at a time, so that
// delivery crashed (the receiver deduplicates on the notification id).
// KEYS: record; ARGV: new record, lease ms, message id, "1" for a
// redelivery. Returns a claimResult.
var claimScript = script.New(`
local v = redis.call('GET', KEYS[1])
if v then
  local ok, r = pcall(cjson.decode, v)
  if not ok or type(r) ~= 'table' or r.state == 'sent' then return 'sent' end
  if r.state == 'sending' then
    if ARGV[4] ~= '1' or r.message_id ~= ARGV[3] then return 'busy' end
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
    return 'resumed'
  end
  if r.state == 'rejected' and r.message_id == ARGV[3] then return 'rejected' end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 'claimed'`)

// settleScript replaces (ARGV[2] non-empty, for ARGV[3] ms) or deletes the
// record while it holds the caller's token. KEYS: record; ARGV: token, new
// record or "", ttl ms. Returns 1 when it acted.
var settleScript = script.New(`
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local ok, r = pcall(cjson.decode, v)
if not ok or type(r) ~= 'table' or r.token ~= ARGV[1] then return 0 end
if ARGV[2] == '' then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) end
return 1`)

// maxReason bounds an error text kept in a record (clip.String).
const maxReason = 512

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
