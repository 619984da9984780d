package writer

import (
	"cmp"
	"context"
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
	"github.com/dropstream/dropstream/avail/availjson"
	"github.com/dropstream/dropstream/internal/rediskey"
	"github.com/dropstream/dropstream/stream"
)

// ApplyResult is what applying one transition did to the projection.
type ApplyResult string

// Results of Projection.Apply.
const (
	// ResultOpened: a newest raw open of a closed or new entity opened a session.
	ResultOpened ApplyResult = "opened"
	// ResultClosed: a newest raw close of an open entity closed its session.
	ResultClosed ApplyResult = "closed"
	// ResultAlreadyOpen: a raw open of an open entity (the close was lost or
	// is late) starts its own session, as in ClickHouse.
	ResultAlreadyOpen ApplyResult = "already_open"
	// ResultAlreadyClosed: a newest raw close of a closed or unknown entity.
	ResultAlreadyClosed ApplyResult = "already_closed"
	// ResultStable: a stable transition set stable_state.
	ResultStable ApplyResult = "stable"
	// ResultDuplicate: the flip is already applied; nothing changed.
	ResultDuplicate ApplyResult = "duplicate"
	// ResultStale: the transition is older than the entity's newest of its
	// phase, which keeps the state; a raw one still joins the history.
	ResultStale ApplyResult = "stale"
	// ResultExpired: the date is past RetainAfterDate; nothing is stored.
	ResultExpired ApplyResult = "expired"
)

// MetricProjectionApplied counts transitions applied by the projection.
// Int64Counter, unit {transition}, attribute result (an ApplyResult).
const MetricProjectionApplied = "dropstream.writer.projection.applied"

// Projection keeps availability entities' state in Redis: the
// "avail-projection" stage. The result is the same in any order of
// transitions and on repeats: each field is newest-wins, min or max. It is
// safe for concurrent use.
type Projection struct {
	rdb         redis.UniversalClient
	cfg         ProjectionConfig
	topic       stream.Topic
	versionKeys []string // by partition
	applied     metric.Int64Counter
	listPages   metric.Int64Counter
}

// NewProjection returns a projection reporting to tel.MeterProvider (nil:
// the global one), or cfg's validation error.
func NewProjection(rdb redis.UniversalClient, cfg ProjectionConfig, tel stream.Telemetry) (*Projection, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if rdb == nil {
		return nil, errors.New("writer: projection needs a Redis client")
	}
	meter := tel.WithDefaults().MeterProvider.Meter(instrumentationScope)
	applied, err := meter.Int64Counter(MetricProjectionApplied,
		metric.WithDescription("Transitions applied to the projection, by result."), metric.WithUnit("{transition}"))
	if err != nil {
		return nil, fmt.Errorf("writer: projection metric: %w", err)
	}
	listPages, err := meter.Int64Counter(MetricProjectionListPages,
		metric.WithDescription("List pages served by a ListCache, by cache hit or miss."), metric.WithUnit("{page}"))
	if err != nil {
		return nil, fmt.Errorf("writer: projection metric: %w", err)
	}
	p := &Projection{rdb: rdb, cfg: cfg, topic: avail.NewTopics(cfg.Partitions).Transitions, applied: applied, listPages: listPages}
	for q := range cfg.Partitions {
		p.versionKeys = append(p.versionKeys, versionKey(p.topic.HashTag(q)))
	}
	return p, nil
}

// Stage returns the "avail-projection" stage over the transition topic.
func (p *Projection) Stage() stream.Stage {
	return stream.Stage{Name: StageProjection, Topic: p.topic, Handler: p.Handle, Config: p.cfg.Runner}
}

// Handle applies the message's transitions in order. An undecodable or
// invalid message is dead-lettered; others are retried whole, harmlessly.
func (p *Projection) Handle(ctx context.Context, m *stream.Message) error {
	ts, err := decodeTransitions(m)
	if err != nil {
		return err
	}
	for _, t := range ts {
		if _, err := p.Apply(ctx, m.Partition, t); err != nil {
			return err
		}
	}
	return nil
}

// decodeTransitions decodes and checks the transitions of a message.
func decodeTransitions(m *stream.Message) ([]avail.Transition, error) {
	_, ts, err := decodeRunTransitions(m)
	return ts, err
}

// decodeRunTransitions also returns the run record (nil for a single one).
func decodeRunTransitions(m *stream.Message) (*avail.RunRecord, []avail.Transition, error) {
	run, ts, err := availjson.DecodeRunTransitions(m.Type, m.Payload)
	if err != nil {
		return nil, nil, stream.Permanentf("writer: decode transitions %s: %w", m.ID, err)
	}
	for i, t := range ts {
		if err := checkTransition(t); err != nil {
			return nil, nil, stream.Permanent(fmt.Errorf("writer: transition %d of %s: %w", i, m.ID, err))
		}
	}
	if run != nil {
		if err := checkRun(m, *run); err != nil {
			return nil, nil, err
		}
	}
	return run, ts, nil
}

// checkTransition reports why t cannot be applied.
func checkTransition(t avail.Transition) error {
	switch {
	case t.Entity.Key == "":
		return errors.New("entity key is empty")
	case t.RunID == "" || strings.ContainsFunc(t.RunID, func(r rune) bool { return r < 0x20 }):
		// Control characters would sort a run id differently in history members.
		return fmt.Errorf("run id %q is empty or holds a control character", t.RunID)
	case t.Kind != avail.KindOpen && t.Kind != avail.KindClose:
		return fmt.Errorf("kind %q: want open or close", t.Kind)
	case t.RunAt.IsZero():
		return errors.New("run_at is zero")
	}
	return nil
}

// Apply applies t atomically to the entity's projection: raw transitions
// move state and sessions, stable ones only stable_state.
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
	// Attributes left empty (as on closes) keep their stored values.
	var attrs []any
	for _, kv := range [][2]string{{"kind", e.Kind}, {"provider", e.Provider}, {"venue", e.Venue},
		{"venue_name", e.VenueName}, {"date", e.Date}, {"time", e.Time}, {"party_size", strconv.Itoa(e.PartySize)},
		{"scope_key", t.ScopeKey}, {"source_id", t.SourceID}} {
		if kv[1] != "" && kv[1] != "0" {
			attrs = append(attrs, kv[0], kv[1])
		}
	}
	var result ApplyResult
	run := func(sc *redis.Script, keys []string, args ...any) error {
		res, err := sc.Run(ctx, p.rdb, keys, append(args, attrs...)...).Text()
		if err != nil {
			return fmt.Errorf("writer: apply %s to %s: %w", t.EventID, e.Key, err)
		}
		result = ApplyResult(res)
		p.applied.Add(ctx, 1, metric.WithAttributes(attribute.String("result", res)))
		return nil
	}
	if t.Stable {
		if err := run(stableScript, []string{k.entity, k.all, k.version}, t.Kind, t.RunID, runAt, t.EventID, e.Key, exp); err != nil {
			return "", err
		}
	}
	if isRaw(t) {
		lastSeen := int64(0)
		if !t.LastSeen.IsZero() {
			lastSeen = t.LastSeen.UnixMilli()
		}
		if err := run(rawScript, []string{k.entity, k.sessions, k.all, k.open, k.closed, k.version}, t.Kind, t.RunID, runAt, t.EventID,
			avail.SessionID(e.Key, t.RunID), strconv.FormatInt(lastSeen, 10), t.TraceID, e.Key, maxFlips(p.cfg.MaxSessions), exp); err != nil {
			return "", err
		}
	}
	return result, nil
}

// expiry returns an entity's expiry (Unix ms, 0: never); false if past.
func expiry(date string, retain time.Duration) (int64, bool) {
	d, err := time.Parse(time.DateOnly, date)
	if err != nil || retain < 0 {
		return 0, true
	}
	at := d.Add(24*time.Hour + retain)
	return at.UnixMilli(), time.Now().Before(at)
}

// isRaw reports whether t is a raw flip: Raw, or not Stable (older producers).
func isRaw(t avail.Transition) bool { return t.Raw || !t.Stable }

// entityOf fills attributes the transition left out from its key.
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

// maxFlips is how many raw flips an entity's history keeps: enough for
// maxSessions sessions of an open and a close each.
func maxFlips(maxSessions int) int { return 2 * maxSessions }

// keys are the Redis keys of one entity in one partition; sessions holds
// its history of raw flips (see rawScript), version the partition's
// version (see bump).
type keys struct{ entity, sessions, all, open, closed, version string }

func keysOf(tag, entityKey string) keys {
	return keys{
		entity:   rediskey.Key(tag, "entity", entityKey),
		sessions: rediskey.Key(tag, "sessions", entityKey),
		all:      indexKey(tag, ""),
		open:     indexKey(tag, StateOpen),
		closed:   indexKey(tag, StateClosed),
		version:  versionKey(tag),
	}
}

// versionKey is a partition's version: it changes with every change a
// script applies to the partition's entities (see ListCache).
func versionKey(tag string) string { return rediskey.Key(tag, "entities", "version") }

// indexKey is a partition's sorted set of entity keys in state ("": all).
func indexKey(tag, state string) string {
	state = cmp.Or(state, "all")
	return rediskey.Key(tag, "entities", state)
}

// Entity states.
const (
	StateOpen   = "open"
	StateClosed = "closed"
)

// luaClock holds the scripts' shared functions. Transitions order by
// (run_at ms, run id, kind); the newest transition's attributes win.
const luaClock = `
local function lt(a, b)
  if a == b then return false end
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end
local function after(ms, run, ms2, run2)
  if ms ~= ms2 then return ms > ms2 end
  return lt(run2, run)
end
-- bump moves a partition's version past its value and the server's clock
-- (µs), so a version never repeats, even after a failover lost writes.
local function bump(k)
  local t = redis.call('TIME')
  local v = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local cur = tonumber(redis.call('GET', k))
  if cur and cur >= v then v = cur + 1 end
  redis.call('SET', k, string.format('%d', v))
end
local function setAttrs(h, f, first, newest, ms, msS, run)
  for i = first, #ARGV, 2 do
    local name, v = ARGV[i], ARGV[i + 1]
    if name == 'venue_name' then
      local c = redis.call('HGET', h, 'name_at')
      local sp = c and string.find(c, ' ', 1, true)
      if not sp or after(ms, run, tonumber(string.sub(c, 1, sp - 1)), string.sub(c, sp + 1)) then
        for _, x in ipairs({'venue_name', v, 'name_at', msS .. ' ' .. run}) do f[#f + 1] = x end
      end
    elseif newest then
      f[#f + 1] = name; f[#f + 1] = v
    else
      redis.call('HSETNX', h, name, v)
    end
  end
end
`

// rawScript applies a raw transition. KEYS: entity hash, history, index all,
// index open, index closed, version. ARGV: kind, run id, run_at ms, event id, session
// id, last_seen ms, trace id, entity key, history size, expiry (ms, "0":
// none), then attribute pairs. The history holds the newest flips,
// "<run id>\n<o|c>\n<trace id>" by run_at; an older list is converted.
var rawScript = redis.NewScript(luaClock + `
local h, hist = KEYS[1], KEYS[2]
local kind, run, atS, trace = ARGV[1], ARGV[2], ARGV[3], ARGV[7]
local at = tonumber(atS)
local k = string.sub(kind, 1, 1)
local cur = redis.call('HMGET', h, 'last_run_at', 'last_run', 'state', 'opened_at', 'open_run',
  'first_seen_at', 'last_seen_at', 'closed_at', 'stable_at', 'stable_run', 'trace_id')
local function add(msS, r, kk, tr)
  local p = r .. '\n' .. kk .. '\n'
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', hist, msS, msS)) do
    if string.sub(m, 1, #p) == p then return false end
  end
  redis.call('ZADD', hist, msS, p .. tr)
  return true
end
local typ = redis.call('TYPE', hist).ok
if typ ~= 'zset' then
  local recs = {}
  if typ == 'list' then recs = redis.call('LRANGE', hist, 0, -1) end
  if typ ~= 'none' then redis.call('DEL', hist); bump(KEYS[6]) end
  for _, r in ipairs(recs) do
    local s = cjson.decode(r)
    if s.opened_at and s.open_run then add(s.opened_at, s.open_run, 'o', s.trace_id or '') end
    if s.state == 'closed' and s.closed_at and s.close_run then add(s.closed_at, s.close_run, 'c', s.trace_id or '') end
  end
  if cur[1] and cur[2] then add(cur[1], cur[2], string.sub(cur[3] or 'closed', 1, 1), cur[11] or '') end
  if cur[3] == 'open' and cur[2] and cur[5] and cur[2] ~= cur[5] then
    -- An open of an open entity did not start a session then; it does now.
    cur[4], cur[5] = cur[1], cur[2]
    redis.call('HSET', h, 'opened_at', cur[4], 'open_run', cur[5],
      'session_id', redis.sha1hex(ARGV[8] .. '\n' .. cur[5] .. '\nsession'))
  end
end
if not add(atS, run, k, trace) then return 'duplicate' end
bump(KEYS[6])
redis.call('ZREMRANGEBYRANK', hist, 0, -(tonumber(ARGV[9]) + 1))
local lastAt, lastRun = tonumber(cur[1]), cur[2] or ''
local stAt = tonumber(cur[9])
local newerRun = (not lastAt or after(at, run, lastAt, lastRun))
local newest = newerRun or (at == lastAt and run == lastRun and lt(string.sub(cur[3] or '', 1, 1), k))
local key = ARGV[8]
local f = {}
local result = 'stale'
if newest then
  local st = 'closed'
  if kind == 'open' then
    st = 'open'
    result = cur[3] == 'open' and 'already_open' or 'opened'
    redis.call('ZADD', KEYS[4], 0, key)
    redis.call('ZREM', KEYS[5], key)
  else
    result = cur[3] == 'open' and 'closed' or 'already_closed'
    redis.call('ZADD', KEYS[5], 0, key)
    redis.call('ZREM', KEYS[4], key)
  end
  for _, v in ipairs({'state', st, 'last_run', run, 'last_run_at', atS, 'last_event', ARGV[4], 'trace_id', trace}) do
    f[#f + 1] = v
  end
end
redis.call('ZADD', KEYS[3], 0, key)
local seen
if kind == 'open' then
  seen = at
  local openedAt = tonumber(cur[4])
  if not openedAt or after(at, run, openedAt, cur[5] or '') then
    for _, v in ipairs({'opened_at', atS, 'session_id', ARGV[5], 'open_run', run}) do f[#f + 1] = v end
  end
  local first = tonumber(cur[6])
  if not first or at < first then f[#f + 1] = 'first_seen_at'; f[#f + 1] = atS end
else
  seen = tonumber(ARGV[6]) or 0
  local closedAt = tonumber(cur[8])
  if not closedAt or at > closedAt then f[#f + 1] = 'closed_at'; f[#f + 1] = atS end
end
if seen > (tonumber(cur[7]) or 0) then f[#f + 1] = 'last_seen_at'; f[#f + 1] = string.format('%d', seen) end
setAttrs(h, f, 11, newerRun and (not stAt or after(at, run, stAt, cur[10] or '')), at, atS, run)
if #f > 0 then redis.call('HSET', h, unpack(f)) end
if ARGV[10] ~= '0' then
  redis.call('PEXPIREAT', h, ARGV[10])
  redis.call('PEXPIREAT', hist, ARGV[10])
end
return result
`)

// stableScript applies a stable transition. KEYS: entity hash, index all,
// version.
// ARGV: kind, run id, run_at ms, event id, entity key, expiry, attributes.
var stableScript = redis.NewScript(luaClock + `
local h = KEYS[1]
local run, atS = ARGV[2], ARGV[3]
local at = tonumber(atS)
local st = 'closed'
if ARGV[1] == 'open' then st = 'open' end
local cur = redis.call('HMGET', h, 'stable_at', 'stable_run', 'stable_state', 'last_run_at', 'last_run')
local lastAt, lastRun, lastSt = tonumber(cur[1]), cur[2] or '', cur[3] or ''
if lastAt and at == lastAt and run == lastRun and st == lastSt then return 'duplicate' end
bump(KEYS[3])
local newerRun = not lastAt or after(at, run, lastAt, lastRun)
local f = {}
local result = 'stale'
if newerRun or (at == lastAt and run == lastRun and lt(lastSt, st)) then
  f = {'stable_state', st, 'stable_at', atS, 'stable_run', run, 'stable_event', ARGV[4]}
  result = 'stable'
end
local rawAt = tonumber(cur[4])
setAttrs(h, f, 7, newerRun and (not rawAt or after(at, run, rawAt, cur[5] or '')), at, atS, run)
if #f > 0 then redis.call('HSET', h, unpack(f)) end
if ARGV[6] ~= '0' then redis.call('PEXPIREAT', h, ARGV[6]) end
redis.call('ZADD', KEYS[2], 0, ARGV[5])
return result
`)
