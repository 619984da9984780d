package diff

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/avail"
)

// Apply applies one snapshot to its scope's diff state and appends its
// transitions and run record to the partition's output streams, in one
// atomic script (see the package documentation for the semantics).
// traceparent, a W3C traceparent or "", is stored on every appended entry
// so the trace continues into the stages that read them; its trace id goes
// into the payloads' trace_id. The snapshot must pass Validate, otherwise
// the error wraps ErrInvalidSnapshot and nothing is written. Apply is
// idempotent: applying a snapshot again changes nothing and only appends a
// run record with Applied false. So Result.Applied false may also mean that
// an earlier attempt applied it: the Redis client retries a script whose
// reply timed out (a snapshot near avail.MaxEntities can run for seconds).
func Apply(ctx context.Context, rdb redis.UniversalClient, topics avail.Topics, snap avail.Snapshot, traceparent string) (Result, error) {
	keys, args, err := prepare(topics, Input{Snapshot: snap, TraceParent: traceparent}, false)
	if err != nil {
		return Result{}, err
	}
	reply, err := diffScript.Run(ctx, rdb, keys, args...).Int64Slice()
	if err != nil {
		return Result{}, fmt.Errorf("diff: apply run %q of scope %q: %w", snap.RunID, snap.ScopeKey, err)
	}
	return parseReply(reply)
}

// ApplyBatch applies the snapshots in order, pipelining their scripts in
// one round trip (per cluster node). Results are by index. Every input is
// validated first; if one is invalid nothing is applied and the error wraps
// ErrInvalidSnapshot. On a Redis error some snapshots may have been applied
// and others not (their Result is zero); since applying is idempotent,
// retrying the whole batch is safe. Snapshots of one scope in one batch are
// applied in the batch's order, with one exception: a snapshot whose script
// was missing from the server's cache (NOSCRIPT) is retried after the
// others, so if the cache was loaded by another client in the middle of
// the pipeline it may follow a newer snapshot of its scope and be ignored
// as a late run.
func ApplyBatch(ctx context.Context, rdb redis.UniversalClient, topics avail.Topics, inputs []Input) ([]Result, error) {
	return applyBatch(ctx, rdb, topics, inputs, false)
}

// Pending is an entity whose raw state differs from its stable state and
// is waiting for confirmation.
type Pending struct {
	// Kind is avail.KindOpen or avail.KindClose: the raw state awaiting
	// confirmation.
	Kind string
	// Count is the number of consecutive applied OK runs that observed it,
	// the flip's own run included.
	Count int
	// Baseline is set for opens of the scope's first applied OK run.
	Baseline bool
	// LastSeen is, for a close, the run_at of the last run that observed
	// the entity open; zero for opens.
	LastSeen time.Time
	// ReleasedAfterMS is, for an open, the run_at in Unix ms of the
	// scope's OK run before the one that first saw it (it opened after);
	// 0 when not known.
	ReleasedAfterMS int64
}

// State is the diff state of one scope.
type State struct {
	// Open holds the raw open entity keys, sorted.
	Open []string
	// Pending holds the entities awaiting stabilization, by key.
	Pending map[string]Pending
	// LastRunID and LastRunAt (millisecond precision) name the last applied
	// run; LastRunID is empty before the first one.
	LastRunID string
	LastRunAt time.Time
	// LastOKRunAt is the run_at of the last applied OK run; zero before the
	// first one (the next OK run is then the baseline).
	LastOKRunAt time.Time
	// HeldRunID names the last run when the guard held it: the next OK run
	// confirms its closes (it would close as much) or shows them false.
	HeldRunID string
	// Flaps holds, under per-venue stabilization, each venue's flap
	// record (see FlapWindow); nil when it was never on.
	Flaps map[string]VenueFlaps
}

// The bounds of a venue's flap record, as diff.lua has them: past
// FlapWindow raw opens both counts halve; below MinFlapOpens opens the
// snapshot's k stands.
const (
	FlapWindow   = 32
	MinFlapOpens = 4
)

// runIsNewer reports whether (at, id) orders after (lastAt, lastID): run_at
// first, then run_id byte-wise.
func runIsNewer(at int64, id string, lastAt int64, lastID string) bool {
	if at != lastAt {
		return at > lastAt
	}
	return id > lastID
}

// VenueFlaps is a venue's flap record in its scope's diff state.
type VenueFlaps struct {
	// Opens counts raw opens and Flaps the flaps among them, decayed.
	Opens, Flaps int
}

// venueK returns the k of a venue with flap record c (ok: it has one)
// under per-venue stabilization of at most maxK, and k the snapshot's.
func venueK(c VenueFlaps, ok bool, k, maxK int) int {
	switch {
	case !ok || c.Opens < MinFlapOpens:
		return k
	case c.Flaps*20 <= c.Opens:
		return 1
	default:
		return min(maxK, 2+c.Flaps*(maxK-1)/c.Opens)
	}
}

// decay halves a record whose opens exceed FlapWindow.
func (c VenueFlaps) decay() VenueFlaps {
	for c.Opens > FlapWindow {
		c.Opens, c.Flaps = c.Opens/2, c.Flaps/2
	}
	return c
}

// venueOf returns the venue part of an entity key: the text between its
// first and second "|" (as the script finds it).
func venueOf(key string) string {
	_, rest, ok := strings.Cut(key, "|")
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, "|")
	return v
}

// parseFlaps decodes a flap record "<opens>:<flaps>".
func parseFlaps(v string) (VenueFlaps, error) {
	o, f, ok := strings.Cut(v, ":")
	opens, err1 := strconv.Atoi(o)
	flaps, err2 := strconv.Atoi(f)
	if !ok || err1 != nil || err2 != nil || opens < 0 || flaps < 0 {
		return VenueFlaps{}, fmt.Errorf("malformed flap record %q", v)
	}
	return VenueFlaps{Opens: opens, Flaps: flaps}, nil
}

// ReadState returns the diff state of one scope as the script keeps it in
// Redis (for inspection, debugging and tests). It reads four keys without
// a transaction, so under concurrent applies it may mix two runs' states.
func ReadState(ctx context.Context, rdb redis.UniversalClient, topics avail.Topics, scopeKey string) (State, error) {
	keys, err := KeysOf(topics, scopeKey)
	if err != nil {
		return State{}, err
	}
	pipe := rdb.Pipeline()
	open := pipe.HKeys(ctx, keys.Open)
	pend := pipe.HGetAll(ctx, keys.Pending)
	last := pipe.HMGet(ctx, keys.Scope, "at", "id", "ok", "held")
	flaps := pipe.HGetAll(ctx, keys.Flaps)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return State{}, fmt.Errorf("diff: read state of scope %q: %w", scopeKey, err)
	}
	st := State{Open: open.Val()}
	slices.Sort(st.Open)
	for key, v := range pend.Val() {
		p, err := parsePending(v)
		if err != nil {
			return State{}, fmt.Errorf("diff: pending entry of %q in scope %q: %w", key, scopeKey, err)
		}
		if st.Pending == nil {
			st.Pending = map[string]Pending{}
		}
		st.Pending[key] = p
	}
	for venue, v := range flaps.Val() {
		c, err := parseFlaps(v)
		if err != nil {
			return State{}, fmt.Errorf("diff: venue %q in scope %q: %w", venue, scopeKey, err)
		}
		if st.Flaps == nil {
			st.Flaps = map[string]VenueFlaps{}
		}
		st.Flaps[venue] = c
	}
	vals := last.Val()
	if at, ok := vals[0].(string); ok {
		ms, err := strconv.ParseInt(at, 10, 64)
		if err != nil {
			return State{}, fmt.Errorf("diff: scope %q: last run_at %q: %w", scopeKey, at, err)
		}
		st.LastRunAt = time.UnixMilli(ms)
	}
	st.LastRunID, _ = vals[1].(string)
	st.HeldRunID, _ = vals[3].(string)
	if okAt, ok := vals[2].(string); ok {
		if st.LastOKRunAt, err = time.Parse(time.RFC3339Nano, okAt); err != nil {
			return State{}, fmt.Errorf("diff: scope %q: last ok run_at: %w", scopeKey, err)
		}
	}
	return st, nil
}

// pendingRE matches a pending entry: kind, count, baseline flag, last seen.
var pendingRE = regexp.MustCompile(`^([oc])([0-9]+)(b?)@?([0-9]*):?(.*)$`)

// parsePending decodes a pending entry
// "<o|c><count>[b][@<released after ms>][:<last seen>]".
func parsePending(v string) (Pending, error) {
	m := pendingRE.FindStringSubmatch(v)
	if m == nil {
		return Pending{}, fmt.Errorf("malformed pending entry %q", v)
	}
	count, err := strconv.Atoi(m[2])
	if err != nil {
		return Pending{}, fmt.Errorf("pending entry %q: %w", v, err)
	}
	p := Pending{Kind: avail.KindOpen, Count: count, Baseline: m[3] == "b"}
	if m[1] == "c" {
		p.Kind = avail.KindClose
	}
	if m[4] != "" {
		if p.ReleasedAfterMS, err = strconv.ParseInt(m[4], 10, 64); err != nil {
			return Pending{}, fmt.Errorf("pending entry %q: %w", v, err)
		}
	}
	if m[5] != "" {
		if p.LastSeen, err = time.Parse(time.RFC3339Nano, m[5]); err != nil {
			return Pending{}, fmt.Errorf("pending entry %q: last seen: %w", v, err)
		}
	}
	return p, nil
}
