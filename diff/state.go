package diff

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/avail"
)

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
