package diff

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/avail/availjson"
	"github.com/dropstream/dropstream/internal/script"
)

// luaSource is the diff script (KEYS and ARGV: prepare); see
// parseReply for its reply.
//
//go:embed diff.lua
var luaSource string

var diffScript = script.New(luaSource)

// Input is one snapshot to apply with the W3C traceparent of the span that
// processes it.
type Input struct {
	Snapshot    avail.Snapshot
	TraceParent string
	// Guard is the false-close guard; nil: none.
	Guard *Guard
	// PerVenueMaxK, 1..MaxStabilization, turns per-venue stabilization on;
	// 0, the default, leaves it off. Each venue's k then comes from its
	// flap rate: a flap is a raw close of an opening still pending or made
	// by the previous OK run; opens and flaps halve once the opens exceed
	// 32. k is the snapshot's below 4 opens, 1 when at most 5% flapped,
	// else min(maxK, 2 + ⌊flaps·(maxK−1)/opens⌋).
	PerVenueMaxK int
}

// applyBatch applies the inputs in one pipeline, results by index; after a
// Redis error a retry is safe. validated skips Validate.
func applyBatch(ctx context.Context, rdb redis.UniversalClient, topics avail.Topics, inputs []Input, validated bool) ([]Result, error) {
	calls := make([]script.Call, len(inputs))
	for i, in := range inputs {
		keys, args, err := prepare(topics, in, validated)
		if err != nil {
			return nil, fmt.Errorf("diff: batch input %d: %w", i, err)
		}
		calls[i] = script.Call{Keys: keys, Args: args}
	}
	results := make([]Result, len(inputs))
	cmds, _ := diffScript.RunAll(ctx, rdb, calls) // a failed load is each retried command's error
	var errs []error
	for i, cmd := range cmds {
		reply, err := cmd.Int64Slice()
		if err == nil {
			results[i], err = parseReply(reply)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("run %q of scope %q: %w", inputs[i].Snapshot.RunID, inputs[i].Snapshot.ScopeKey, err))
		}
	}
	if len(errs) > 0 {
		return results, fmt.Errorf("diff: apply batch: %w", errors.Join(errs...))
	}
	return results, nil
}

// prepare validates an input, unless validated says it passed Validate
// already, and builds the script's keys and arguments.
func prepare(topics avail.Topics, in Input, validated bool) ([]string, []any, error) {
	snap := in.Snapshot
	if !validated {
		if err := Validate(snap); err != nil {
			return nil, nil, err
		}
	}
	if err := validPerVenueMaxK(in.PerVenueMaxK); err != nil {
		return nil, nil, err
	}
	keys, err := KeysOf(topics, snap.ScopeKey)
	if err != nil {
		return nil, nil, err
	}
	obs := observed(snap)
	tp, traceID := traceParent(in.TraceParent)
	var guard Guard
	if in.Guard != nil {
		guard = *in.Guard
	}
	args := make([]any, 0, 17+2*len(obs)) // go-redis sends a bool as 1 or 0
	args = append(args, snap.RunID, strconv.FormatInt(snap.RunAt.UnixMilli(), 10),
		timeText(snap.RunAt), timeText(snap.StartedAt), snap.ScopeKey, snap.SourceID, snap.Provider,
		snap.OK, runError(snap), strconv.Itoa(stabilization(snap)), snap.NotifyFirstSight,
		tp, traceID, strconv.FormatInt(StateTTL.Milliseconds(), 10), strconv.Itoa(guard.Min), strconv.Itoa(guard.permille()),
		strconv.Itoa(in.PerVenueMaxK))
	// The entities: their number, the default argument, their keys, then
	// the arguments that differ from the default (see entityArgs).
	x := entityArgs{seen: map[string]int{}, buf: make([]byte, 0, 256)}
	first := len(args) + 3 // ARGV index (1-based) of the first key
	for i, e := range obs {
		x.add(e, first+i)
	}
	if x.def == nil {
		x.def = []byte{}
	}
	args = append(args, strconv.Itoa(len(obs)), x.def)
	for _, e := range obs {
		args = append(args, e.Key)
	}
	keyList := []string{keys.Open, keys.Scope, keys.Pending, keys.Transitions, keys.Runs, keys.LegacyOpen, keys.Flaps} // KEYS order
	return keyList, append(args, x.over...), nil
}

// entityArgs builds the script's entity arguments: a key avail.ParseKey
// rebuilds sends only its extras, others their whole JSON; the first
// argument is the default and repeats are sent as "=<i>".
type entityArgs struct {
	buf     []byte
	def     []byte // the default argument; nil until the first rebuildable entity
	seen    map[string]int
	over    []any
	last    avail.Entity // the last rebuildable entity, whose argument is lastArg (nil: none yet)
	lastArg []byte
}

// add adds the argument of entity e, whose key is ARGV[at].
func (x *entityArgs) add(e avail.Entity, at int) {
	if p, err := avail.ParseKey(e.Key); err != nil || p.Kind != e.Kind || p.Provider != e.Provider ||
		p.Venue != e.Venue || p.Date != e.Date || p.Time != e.Time || p.PartySize != e.PartySize {
		start := len(x.buf)
		x.buf = availjson.AppendEntity(x.buf, e)
		x.over = append(x.over, strconv.Itoa(at), x.buf[start:len(x.buf):len(x.buf)])
		return
	}
	arg := x.lastArg
	if arg == nil || e.VenueName != x.last.VenueName || !maps.Equal(e.Attrs, x.last.Attrs) {
		arg = []byte{}
		if e.VenueName != "" || len(e.Attrs) > 0 {
			start := len(x.buf)
			x.buf = availjson.AppendEntityExtras(append(x.buf, '+'), e)
			arg = x.buf[start:len(x.buf):len(x.buf)]
		}
		x.last, x.lastArg = e, arg
	}
	if x.def == nil {
		x.def = arg
		return
	}
	if bytes.Equal(arg, x.def) {
		return
	}
	if m, ok := x.seen[string(arg)]; ok {
		x.over = append(x.over, strconv.Itoa(at), "="+strconv.Itoa(m))
		return
	}
	x.seen[string(arg)] = at
	x.over = append(x.over, strconv.Itoa(at), arg)
}

// parseReply reads the script's {applied, opened, closed, stable opened,
// stable closed}.
func parseReply(r []int64) (Result, error) {
	if len(r) != 5 && len(r) != 7 && len(r) != 7+MaxStabilization {
		return Result{}, fmt.Errorf("diff: script replied %v, want 5, 7 or %d integers", r, 7+MaxStabilization)
	}
	if r[0] == 2 {
		return Result{Held: true}, nil
	}
	res := Result{Applied: r[0] == 1, Opened: int(r[1]), Closed: int(r[2]),
		StableOpened: int(r[3]), StableClosed: int(r[4])}
	if len(r) >= 7 {
		res.Notices, res.ReleasedAfterMS = int(r[5]), r[6]
	}
	for i, n := range r[min(len(r), 7):] {
		res.VenueK[i] = int(n)
	}
	return res, nil
}

// traceParent returns a well-formed W3C traceparent (version 00) and its
// trace id, or two empty strings.
func traceParent(tp string) (string, string) {
	parts := strings.Split(tp, "-")
	if len(parts) != 4 || parts[0] != "00" || len(parts[1]) != 32 || len(parts[2]) != 16 || len(parts[3]) != 2 {
		return "", ""
	}
	for _, p := range parts[1:] {
		if _, err := hex.DecodeString(p); err != nil || strings.ToLower(p) != p {
			return "", ""
		}
	}
	if strings.Trim(parts[1], "0") == "" || strings.Trim(parts[2], "0") == "" {
		return "", ""
	}
	return tp, parts[1]
}

// timeText is t's JSON encoding without the quotes (RFC 3339 with
// nanoseconds); Validate has checked that it encodes.
func timeText(t time.Time) string { return t.Format(time.RFC3339Nano) }
