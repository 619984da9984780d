package writer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/avail"
)

// ErrNotFound is returned (wrapped) for an entity the projection never saw.
var ErrNotFound = errors.New("writer: entity not found")

// EntityState is the projection of one entity.
type EntityState struct {
	// Key is the canonical entity key (avail.SlotKey and friends).
	Key string `json:"key"`
	// Partition is the transition partition the entity lives in (that of its
	// scope key).
	Partition int `json:"partition"`
	// State is StateOpen or StateClosed, from raw transitions; empty when
	// only stable transitions were seen.
	State string `json:"state,omitempty"`
	// StableState is StateOpen or StateClosed from stable transitions;
	// empty until the first one.
	StableState string    `json:"stable_state,omitempty"`
	StableAt    time.Time `json:"stable_at,omitzero"`
	Kind        string    `json:"kind,omitempty"`
	Provider    string    `json:"provider,omitempty"`
	Venue       string    `json:"venue,omitempty"`
	VenueName   string    `json:"venue_name,omitempty"`
	Date        string    `json:"date,omitempty"`
	Time        string    `json:"time,omitempty"`
	PartySize   int       `json:"party_size,omitempty"`
	ScopeKey    string    `json:"scope_key,omitempty"`
	SourceID    string    `json:"source_id,omitempty"`
	FirstSeenAt time.Time `json:"first_seen_at,omitzero"`
	OpenedAt    time.Time `json:"opened_at,omitzero"`
	ClosedAt    time.Time `json:"closed_at,omitzero"`
	LastSeenAt  time.Time `json:"last_seen_at,omitzero"`
	// LastRun and LastRunAt identify the last applied raw transition's run.
	LastRun   string    `json:"last_run,omitempty"`
	LastRunAt time.Time `json:"last_run_at,omitzero"`
	LastEvent string    `json:"last_event,omitempty"`
	// SessionID is the current session when open, else the last one.
	SessionID string `json:"session_id,omitempty"`
	TraceID   string `json:"trace_id,omitempty"`
}

// Session is one availability session (open window) of an entity.
type Session struct {
	ID       string    `json:"id"`
	State    string    `json:"state"` // StateOpen or StateClosed
	OpenRun  string    `json:"open_run"`
	OpenedAt time.Time `json:"opened_at"`
	CloseRun string    `json:"close_run,omitempty"`
	ClosedAt time.Time `json:"closed_at,omitzero"`
	// Duration is ClosedAt − OpenedAt; zero while open.
	Duration time.Duration `json:"duration"`
	// TraceID is the trace of the transition that last changed the session.
	TraceID string `json:"trace_id,omitempty"`
}

// Get returns the projection of the entity key, reading every partition in
// one round trip (the newest copy wins), or ErrNotFound.
func (p *Projection) Get(ctx context.Context, key string) (EntityState, error) {
	cmds := make([]*redis.MapStringStringCmd, p.cfg.Partitions)
	_, err := p.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for part := range cmds {
			cmds[part] = pipe.HGetAll(ctx, keysOf(p.topic.HashTag(part), key).entity)
		}
		return nil
	})
	if err != nil {
		return EntityState{}, fmt.Errorf("writer: get %q: %w", key, err)
	}
	found := false
	var best EntityState
	for part, c := range cmds {
		if len(c.Val()) == 0 {
			continue
		}
		e := entityFromHash(key, part, c.Val())
		newer := e.LastRunAt.After(best.LastRunAt) ||
			e.LastRunAt.Equal(best.LastRunAt) && e.StableAt.After(best.StableAt)
		if !found || newer {
			best, found = e, true
		}
	}
	if !found {
		return EntityState{}, fmt.Errorf("writer: get %q: %w", key, ErrNotFound)
	}
	return best, nil
}

// Sessions returns up to limit sessions of the entity, newest first,
// paired from its raw flips as ClickHouse's are; or ErrNotFound.
func (p *Projection) Sessions(ctx context.Context, key string, limit int) ([]Session, error) {
	if limit < 1 || limit > p.cfg.MaxSessions {
		limit = p.cfg.MaxSessions
	}
	e, err := p.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	k := keysOf(p.topic.HashTag(e.Partition), key).sessions
	hist, err := p.rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
	if err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE") {
		return p.legacySessions(ctx, k, key, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("writer: sessions of %q: %w", key, err)
	}
	flips := make([]flip, len(hist))
	for i, z := range hist {
		if flips[i], err = parseFlip(z); err != nil {
			return nil, fmt.Errorf("writer: sessions of %q: %w", key, err)
		}
	}
	out := sessionsOf(key, flips)
	return out[:min(len(out), limit)], nil
}

// flip is a raw transition in an entity's history.
type flip struct {
	at    int64 // run_at, Unix ms
	run   string
	open  bool
	trace string
}

// parseFlip reads a member of an entity's history: "<run id>\n<o|c>\n<trace
// id>", scored by run_at in Unix milliseconds.
func parseFlip(z redis.Z) (flip, error) {
	m, _ := z.Member.(string)
	run, rest, ok := strings.Cut(m, "\n")
	if !ok || len(rest) < 2 || rest[1] != '\n' || rest[0] != 'o' && rest[0] != 'c' {
		return flip{}, fmt.Errorf("bad history entry %q", m)
	}
	return flip{at: int64(z.Score), run: run, open: rest[0] == 'o', trace: rest[2:]}, nil
}

// sessionsOf pairs raw flips, oldest first, into sessions, newest first:
// each open starts one, closed by a close right after it.
func sessionsOf(key string, flips []flip) []Session {
	var out []Session
	for i := len(flips) - 1; i >= 0; i-- {
		o := flips[i]
		if !o.open {
			continue
		}
		s := Session{ID: avail.SessionID(key, o.run), State: StateOpen, OpenRun: o.run,
			OpenedAt: time.UnixMilli(o.at).UTC(), TraceID: o.trace}
		if i+1 < len(flips) && !flips[i+1].open {
			c := flips[i+1]
			s.State, s.CloseRun, s.ClosedAt, s.TraceID = StateClosed, c.run, time.UnixMilli(c.at).UTC(), c.trace
			s.Duration = time.Duration(c.at-o.at) * time.Millisecond
		}
		out = append(out, s)
	}
	return out
}

// legacySessions reads the older format: a list of session records.
func (p *Projection) legacySessions(ctx context.Context, k, key string, limit int) ([]Session, error) {
	raw, err := p.rdb.LRange(ctx, k, 0, int64(limit-1)).Result()
	if err != nil {
		return nil, fmt.Errorf("writer: sessions of %q: %w", key, err)
	}
	out := make([]Session, 0, len(raw))
	for _, r := range raw {
		s, err := decodeSession(r)
		if err != nil {
			return nil, fmt.Errorf("writer: sessions of %q: %w", key, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// decodeSession decodes a session record of the list the raw script kept
// before histories: a JSON object whose values are all strings.
func decodeSession(raw string) (Session, error) {
	var r struct {
		SessionID  string `json:"session_id"`
		State      string `json:"state"`
		OpenRun    string `json:"open_run"`
		OpenedAt   string `json:"opened_at"`
		CloseRun   string `json:"close_run"`
		ClosedAt   string `json:"closed_at"`
		DurationMs string `json:"duration_ms"`
		TraceID    string `json:"trace_id"`
	}
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return Session{}, fmt.Errorf("decode session record: %w", err)
	}
	return Session{ID: r.SessionID, State: r.State, OpenRun: r.OpenRun, OpenedAt: msTime(r.OpenedAt),
		CloseRun: r.CloseRun, ClosedAt: msTime(r.ClosedAt),
		Duration: time.Duration(msInt(r.DurationMs)) * time.Millisecond, TraceID: r.TraceID}, nil
}

// entityFromHash builds an EntityState from the entity hash's fields.
func entityFromHash(key string, partition int, h map[string]string) EntityState {
	return EntityState{
		Key: key, Partition: partition, State: h["state"], StableState: h["stable_state"],
		StableAt: msTime(h["stable_at"]), Kind: h["kind"], Provider: h["provider"], Venue: h["venue"],
		VenueName: h["venue_name"], Date: h["date"], Time: h["time"], PartySize: int(msInt(h["party_size"])),
		ScopeKey: h["scope_key"], SourceID: h["source_id"], FirstSeenAt: msTime(h["first_seen_at"]),
		OpenedAt: msTime(h["opened_at"]), ClosedAt: msTime(h["closed_at"]),
		LastSeenAt: msTime(h["last_seen_at"]), LastRun: h["last_run"], LastRunAt: msTime(h["last_run_at"]),
		LastEvent: h["last_event"], SessionID: h["session_id"], TraceID: h["trace_id"],
	}
}

// msTime parses Unix milliseconds; empty or invalid gives the zero time.
func msTime(s string) time.Time {
	ms := msInt(s)
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

func msInt(s string) int64 {
	if s == "" { // most fields of an entity are unset; ParseInt's error allocates
		return 0
	}
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// sweepPage is how many index entries Sweep checks per round trip.
const sweepPage = 1000

// Sweep removes expired entities from every index and returns how many. It
// costs O(entities); it is safe alongside the stage.
func (p *Projection) Sweep(ctx context.Context) (removed int, err error) {
	for part := range p.cfg.Partitions {
		all := indexKey(p.topic.HashTag(part), "")
		lo := "-"
		for {
			members, err := p.rdb.ZRangeByLex(ctx, all, &redis.ZRangeBy{Min: lo, Max: "+", Count: sweepPage}).Result()
			if err != nil {
				return removed, fmt.Errorf("writer: sweep: %w", err)
			}
			if len(members) == 0 {
				break
			}
			exists := make([]*redis.IntCmd, len(members))
			_, err = p.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
				for i, m := range members {
					exists[i] = pipe.Exists(ctx, keysOf(p.topic.HashTag(part), m).entity)
				}
				return nil
			})
			if err != nil {
				return removed, fmt.Errorf("writer: sweep: %w", err)
			}
			var gone []position
			for i, c := range exists {
				if c.Val() == 0 {
					gone = append(gone, position{members[i], part})
				}
			}
			if err := p.unindex(ctx, gone); err != nil {
				return removed, err
			}
			removed += len(gone)
			if len(members) < sweepPage {
				break
			}
			lo = "(" + members[len(members)-1]
		}
	}
	return removed, nil
}

// unindex removes entities whose hash is still gone from their indexes, by
// EVAL (EVALSHA cannot fall back inside a pipeline).
func (p *Projection) unindex(ctx context.Context, gone []position) error {
	if len(gone) == 0 {
		return nil
	}
	_, err := p.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for _, g := range gone {
			tag := p.topic.HashTag(g.part)
			k := keysOf(tag, g.key)
			unindexScript.Eval(ctx, pipe, []string{k.entity, k.all, k.open, k.closed}, g.key)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("writer: unindex: %w", err)
	}
	return nil
}

// unindexScript removes ARGV[1] from the index sets KEYS[2..4] unless the
// entity hash KEYS[1] exists.
var unindexScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
for i = 2, #KEYS do redis.call('ZREM', KEYS[i], ARGV[1]) end
return 1
`)
