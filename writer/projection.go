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
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/stream"
)

// ApplyResult is what applying one transition did to the projection.
type ApplyResult string

// Results of Projection.Apply.
const (
	// ResultOpened: a raw open of a closed (or new) entity; a session opened.
	ResultOpened ApplyResult = "opened"
	// ResultClosed: a raw close of an open entity; its session closed.
	ResultClosed ApplyResult = "closed"
	// ResultAlreadyOpen: a raw open of an open entity (a close was missed);
	// the session goes on, only last_run and last_seen_at move.
	ResultAlreadyOpen ApplyResult = "already_open"
	// ResultAlreadyClosed: a raw close of a closed or unknown entity; no
	// session changes.
	ResultAlreadyClosed ApplyResult = "already_closed"
	// ResultStable: a stable transition set stable_state.
	ResultStable ApplyResult = "stable"
	// ResultDuplicate: the run was already applied to the entity; nothing
	// changed.
	ResultDuplicate ApplyResult = "duplicate"
	// ResultStale: the run is older than the entity's last applied run;
	// nothing changed (last writer wins).
	ResultStale ApplyResult = "stale"
	// ResultExpired: the entity's date is past ProjectionConfig.RetainAfterDate;
	// nothing is stored.
	ResultExpired ApplyResult = "expired"
)

// MetricProjectionApplied counts transitions applied by the projection.
// Int64Counter, unit {transition}, attribute result (an ApplyResult).
const MetricProjectionApplied = "dropstream.writer.projection.applied"

// instrumentationScope names the writer's meter and tracer.
const instrumentationScope = "github.com/dropstream/dropstream/writer"

// Projection keeps the soft state of availability entities in Redis: the
// "avail-projection" stage. It is safe for concurrent use.
//
// The final state is right whatever the order transitions are applied in
// (last writer wins), but a session window is recorded only when its open is
// applied before its close. Copies of the stage that share a partition may
// apply its transitions out of order; for an exact session history give
// each copy its own partitions (stream.RunnerConfig.Partitions).
type Projection struct {
	rdb     redis.UniversalClient
	cfg     ProjectionConfig
	topic   stream.Topic
	applied metric.Int64Counter
}

// NewProjection validates cfg (after defaults) and returns a projection.
// tel.MeterProvider provides its metrics (nil: the global one); the stage's
// spans and logs come from the runtime.
func NewProjection(rdb redis.UniversalClient, cfg ProjectionConfig, tel stream.Telemetry) (*Projection, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if rdb == nil {
		return nil, errors.New("writer: projection needs a Redis client")
	}
	applied, err := meter(tel.MeterProvider).Int64Counter(MetricProjectionApplied,
		metric.WithDescription("Transitions applied to the projection, by result."), metric.WithUnit("{transition}"))
	if err != nil {
		return nil, fmt.Errorf("writer: projection metric: %w", err)
	}
	return &Projection{rdb: rdb, cfg: cfg, topic: avail.NewTopics(cfg.Partitions).Transitions, applied: applied}, nil
}

// Stage returns the "avail-projection" stage over the transition topic.
func (p *Projection) Stage() stream.Stage {
	return stream.Stage{Name: StageProjection, Topic: p.topic, Handler: p.Handle, Config: p.cfg.Runner}
}

// Handle is the stage's handler: it decodes an avail.Transition and applies
// it in the message's partition. Undecodable or invalid transitions are
// permanent errors (dead-lettered).
func (p *Projection) Handle(ctx context.Context, m *stream.Message) error {
	t, err := decodeTransition(m)
	if err != nil {
		return err
	}
	_, err = p.Apply(ctx, m.Partition, t)
	return err
}

// decodeTransition decodes and checks a transition message.
func decodeTransition(m *stream.Message) (avail.Transition, error) {
	var t avail.Transition
	if err := json.Unmarshal(m.Payload, &t); err != nil {
		return t, stream.Permanentf("writer: decode transition %s: %w", m.ID, err)
	}
	if err := checkTransition(t); err != nil {
		return t, stream.Permanent(fmt.Errorf("writer: transition %s: %w", m.ID, err))
	}
	return t, nil
}

// checkTransition reports why t cannot be applied.
func checkTransition(t avail.Transition) error {
	switch {
	case t.Entity.Key == "":
		return errors.New("entity key is empty")
	case t.RunID == "" || strings.ContainsAny(t.RunID, "\n"):
		return fmt.Errorf("run id %q is empty or holds a newline", t.RunID)
	case t.Kind != avail.KindOpen && t.Kind != avail.KindClose:
		return fmt.Errorf("kind %q: want open or close", t.Kind)
	case t.RunAt.IsZero():
		return errors.New("run_at is zero")
	}
	return nil
}

// Apply applies t to the entity's projection in partition (the partition of
// the transition's stream, i.e. of its scope key) in one atomic script, and
// reports what it did. Applying the same transition again, or one of a run
// older than the entity's last applied run, changes nothing (ResultDuplicate,
// ResultStale). Raw transitions move state and sessions; stable ones only
// stable_state; one that is both (stabilization 1) does both, and Apply
// reports the raw result.
func (p *Projection) Apply(ctx context.Context, partition int, t avail.Transition) (ApplyResult, error) {
	if partition < 0 || partition >= p.cfg.Partitions {
		return "", fmt.Errorf("writer: partition %d out of range 0..%d", partition, p.cfg.Partitions-1)
	}
	if err := checkTransition(t); err != nil {
		return "", fmt.Errorf("writer: apply: %w", err)
	}
	e := entityOf(t.Entity)
	if t.EventID == "" {
		t.EventID = avail.EventID(t.RunID, e.Key, t.Kind, t.Stable)
	}
	if sc := trace.SpanContextFromContext(ctx); t.TraceID == "" && sc.IsValid() {
		t.TraceID = sc.TraceID().String()
	}
	expireAt, ok := expiry(e.Date, p.cfg.RetainAfterDate)
	if !ok {
		p.applied.Add(ctx, 1, metric.WithAttributes(attribute.String("result", string(ResultExpired))))
		return ResultExpired, nil
	}
	k := keysOf(p.topic.HashTag(partition), e.Key)
	runAt := strconv.FormatInt(t.RunAt.UnixMilli(), 10)
	exp := strconv.FormatInt(expireAt, 10)
	// Attributes the transition leaves empty (closes carry only what the key
	// tells) keep their stored values.
	var attrs []any
	for _, kv := range [][2]string{{"kind", e.Kind}, {"provider", e.Provider}, {"venue", e.Venue},
		{"venue_name", e.VenueName}, {"date", e.Date}, {"time", e.Time}, {"party_size", strconv.Itoa(e.PartySize)},
		{"scope_key", t.ScopeKey}, {"source_id", t.SourceID}} {
		if kv[1] != "" && kv[1] != "0" {
			attrs = append(attrs, kv[0], kv[1])
		}
	}
	var result ApplyResult
	if t.Stable {
		args := append([]any{t.Kind, t.RunID, runAt, t.EventID, e.Key, exp}, attrs...)
		res, err := stableScript.Run(ctx, p.rdb, []string{k.entity, k.all}, args...).Text()
		if err != nil {
			return "", fmt.Errorf("writer: apply %s to %s: %w", t.EventID, e.Key, err)
		}
		result = ApplyResult(res)
		p.applied.Add(ctx, 1, metric.WithAttributes(attribute.String("result", res)))
	}
	if isRaw(t) {
		lastSeen := int64(0)
		if !t.LastSeen.IsZero() {
			lastSeen = t.LastSeen.UnixMilli()
		}
		args := append([]any{t.Kind, t.RunID, runAt, t.EventID, avail.SessionID(e.Key, t.RunID),
			strconv.FormatInt(lastSeen, 10), t.TraceID, e.Key, p.cfg.MaxSessions, exp}, attrs...)
		res, err := rawScript.Run(ctx, p.rdb, []string{k.entity, k.sessions, k.all, k.open, k.closed}, args...).Text()
		if err != nil {
			return "", fmt.Errorf("writer: apply %s to %s: %w", t.EventID, e.Key, err)
		}
		result = ApplyResult(res)
		p.applied.Add(ctx, 1, metric.WithAttributes(attribute.String("result", res)))
	}
	return result, nil
}

// expiry returns when an entity of the given date expires (Unix ms, 0: never)
// and false when that time has passed. Entities without a date, and every
// entity when retain is negative, never expire.
func expiry(date string, retain time.Duration) (int64, bool) {
	d, err := time.Parse(time.DateOnly, date)
	if err != nil || retain < 0 {
		return 0, true
	}
	at := d.Add(24*time.Hour + retain)
	return at.UnixMilli(), time.Now().Before(at)
}

// isRaw reports whether t is a raw flip: Raw is set, or the transition is
// not a stable confirmation (producers that predate the Raw flag).
func isRaw(t avail.Transition) bool { return t.Raw || !t.Stable }

// entityOf fills an entity's attributes from its key when the transition
// left them out.
func entityOf(e avail.Entity) avail.Entity {
	if e.Provider != "" || e.Kind == avail.EntitySource {
		return e
	}
	parsed, err := avail.ParseKey(e.Key)
	if err != nil {
		return e
	}
	parsed.VenueName, parsed.Attrs = e.VenueName, e.Attrs
	return parsed
}

// keys are the Redis keys of one entity in one partition.
type keys struct{ entity, sessions, all, open, closed string }

func keysOf(tag, entityKey string) keys {
	return keys{
		entity:   "ds:" + tag + ":entity:" + entityKey,
		sessions: "ds:" + tag + ":sessions:" + entityKey,
		all:      indexKey(tag, ""),
		open:     indexKey(tag, StateOpen),
		closed:   indexKey(tag, StateClosed),
	}
}

// indexKey is the sorted set of entity keys of a partition in a state ("":
// all of them).
func indexKey(tag, state string) string {
	if state == "" {
		state = "all"
	}
	return "ds:" + tag + ":entities:" + state
}

// Entity states.
const (
	StateOpen   = "open"
	StateClosed = "closed"
)

// rawScript applies a raw transition. KEYS: entity hash, sessions list,
// index all, index open, index closed. ARGV: kind, run id, run_at ms, event
// id, session id, last_seen ms (0: unknown), trace id, entity key, max
// sessions, expiry (Unix ms, "0": none), then attribute field/value pairs.
var rawScript = redis.NewScript(`
local h = KEYS[1]
local kind, run, atS = ARGV[1], ARGV[2], ARGV[3]
local at = tonumber(atS)
local cur = redis.call('HMGET', h, 'last_run_at', 'last_run', 'state', 'session_id', 'last_seen_at')
local lastAt = tonumber(cur[1])
if lastAt then
  local lastRun = cur[2] or ''
  if at == lastAt and run == lastRun then return 'duplicate' end
  if at < lastAt or (at == lastAt and run < lastRun) then return 'stale' end
end
local f = {'last_run', run, 'last_run_at', atS, 'last_event', ARGV[4], 'trace_id', ARGV[7]}
for i = 11, #ARGV, 2 do f[#f + 1] = ARGV[i]; f[#f + 1] = ARGV[i + 1] end
local state, key = cur[3], ARGV[8]
local seen = tonumber(cur[5]) or 0
local result
redis.call('ZADD', KEYS[3], 0, key)
if kind == 'open' then
  if at > seen then seen = at end
  redis.call('HSETNX', h, 'first_seen_at', atS)
  if state == 'open' then
    result = 'already_open'
  else
    for _, v in ipairs({'state', 'open', 'opened_at', atS, 'session_id', ARGV[5], 'open_run', run}) do f[#f + 1] = v end
    redis.call('LPUSH', KEYS[2], cjson.encode({session_id = ARGV[5], state = 'open', open_run = run,
      opened_at = atS, trace_id = ARGV[7]}))
    redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[9]) - 1)
    redis.call('ZADD', KEYS[4], 0, key)
    redis.call('ZREM', KEYS[5], key)
    result = 'opened'
  end
else
  local ls = tonumber(ARGV[6]) or 0
  if ls > seen then seen = ls end
  if state == 'open' then
    for _, v in ipairs({'state', 'closed', 'closed_at', atS}) do f[#f + 1] = v end
    local head = redis.call('LINDEX', KEYS[2], 0)
    if head then
      local s = cjson.decode(head)
      if s.session_id == cur[4] and s.state == 'open' then
        s.state, s.close_run, s.closed_at = 'closed', run, atS
        s.duration_ms = string.format('%d', at - tonumber(s.opened_at))
        s.trace_id = ARGV[7]
        redis.call('LSET', KEYS[2], 0, cjson.encode(s))
      end
    end
    result = 'closed'
  else
    if state ~= 'closed' then
      for _, v in ipairs({'state', 'closed', 'closed_at', atS}) do f[#f + 1] = v end
    end
    result = 'already_closed'
  end
  redis.call('ZADD', KEYS[5], 0, key)
  redis.call('ZREM', KEYS[4], key)
end
if seen > 0 then f[#f + 1] = 'last_seen_at'; f[#f + 1] = string.format('%d', seen) end
redis.call('HSET', h, unpack(f))
if ARGV[10] ~= '0' then
  redis.call('PEXPIREAT', h, ARGV[10])
  redis.call('PEXPIREAT', KEYS[2], ARGV[10])
end
return result
`)

// stableScript applies a stable transition. KEYS: entity hash, index all.
// ARGV: kind, run id, run_at ms, event id, entity key, expiry (Unix ms,
// "0": none), then attribute field/value pairs.
var stableScript = redis.NewScript(`
local h = KEYS[1]
local run, atS = ARGV[2], ARGV[3]
local at = tonumber(atS)
local cur = redis.call('HMGET', h, 'stable_at', 'stable_run')
local lastAt = tonumber(cur[1])
if lastAt then
  local lastRun = cur[2] or ''
  if at == lastAt and run == lastRun then return 'duplicate' end
  if at < lastAt or (at == lastAt and run < lastRun) then return 'stale' end
end
local st = 'closed'
if ARGV[1] == 'open' then st = 'open' end
local f = {'stable_state', st, 'stable_at', atS, 'stable_run', run, 'stable_event', ARGV[4]}
for i = 7, #ARGV, 2 do f[#f + 1] = ARGV[i]; f[#f + 1] = ARGV[i + 1] end
redis.call('HSET', h, unpack(f))
if ARGV[6] ~= '0' then redis.call('PEXPIREAT', h, ARGV[6]) end
redis.call('ZADD', KEYS[2], 0, ARGV[5])
return 'stable'
`)
