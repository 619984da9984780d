package offer

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"

	"github.com/dropstream/dropstream/internal/script"
	"github.com/dropstream/dropstream/internal/tick"
)

// ServiceFresh is the freshness keeper service (Flow.RunFresh).
const ServiceFresh = "offer-fresh"

// freshKey is the keeper's position: handler tag → the last change
// applied, "v:"+tag → its version.
var freshKey = catalogKey("fresh")

// guardScript returns {1 when the keeper lags past the bound (by the
// server's clock) else 0, the catalog epoch}. KEYS: the keeper's
// position, the epoch, each handler's change stream. ARGV: bound ms, the
// handler tags.
var guardScript = script.New(`
local t = redis.call('TIME')
local cutoff = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) - tonumber(ARGV[1])
local epoch = redis.call('GET', KEYS[2]) or '0'
for i = 3, #KEYS do
  local pos = redis.call('HGET', KEYS[1], ARGV[i - 1]) or '-'
  local start = pos
  if pos ~= '-' then start = '(' .. pos end
  local next = redis.call('XRANGE', KEYS[i], start, '+', 'COUNT', 1)
  if #next > 0 then
    local ms = tonumber(string.match(next[1][1], '^(%d+)'))
    if ms <= cutoff then return {1, epoch} end
  end
end
return {0, epoch}`)

// guard reports whether a search must bypass the cache (the keeper lags
// past Config.FreshBound) and the epoch a result computed now reflects.
func (s *Flow) guard(ctx context.Context) (bool, int64, error) {
	keys, args := []string{freshKey, epochKey}, []any{s.cfg.FreshBound.Milliseconds()}
	for _, h := range s.cfg.Handlers {
		keys = append(keys, changesKey(h.Tag))
		args = append(args, h.Tag)
	}
	r, err := guardScript.Run(ctx, s.rdb, keys, args...).Int64Slice()
	if err != nil || len(r) != 2 {
		return false, 0, fmt.Errorf("offer: freshness guard: %v %w", r, err)
	}
	if r[0] == 1 {
		s.met.bypass.Add(ctx, 1)
	}
	return r[0] == 1, r[1], nil
}

// invalidateScript invalidates the results a change after their epoch
// affects (their data holds the offer, it now matches, or its handler is
// still waited for): a complete one expires now, a processing one
// completes expired. KEYS: per result main, data, waiting. ARGV: now ms,
// n, n triples (offer id, handler, epoch), then per result its forced
// epoch (0: none). Returns how many it invalidated.
var invalidateScript = script.New(`
local now = ARGV[1]
local n = tonumber(ARGV[2])
local forced = 3 + 3 * n
local count = 0
for r = 0, #KEYS / 3 - 1 do
  local main, data, waiting = KEYS[3 * r + 1], KEYS[3 * r + 2], KEYS[3 * r + 3]
  local h = redis.call('HMGET', main, 'status', 'epoch')
  local st, epoch = h[1], tonumber(h[2] or '0')
  if st then
    local hit = tonumber(ARGV[forced + r]) > epoch
    for i = 3, 2 + 3 * n, 3 do
      if hit then break end
      if tonumber(ARGV[i + 2]) > epoch then
        if redis.call('ZSCORE', data, ARGV[i]) then hit = true
        elseif st == 'processing' and redis.call('SISMEMBER', waiting, ARGV[i + 1]) == 1 then hit = true end
      end
    end
    if hit then
      if st == 'complete' then
        if tonumber(redis.call('HGET', main, 'expiry') or '0') > tonumber(now) then
          redis.call('HSET', main, 'expiry', now, 'invalidatedAt', now)
          count = count + 1
        end
      else
        redis.call('HSET', main, 'invalidated', '1', 'invalidatedAt', now)
        count = count + 1
      end
    end
  end
end
return count`)

// change is one entry of a handler's change stream, with the offer as the
// handler holds it now (nil: no more).
type change struct {
	handler, id, entry string
	version, epoch     int64
	at                 time.Time
	offer              *Offer
}

// keeper is the freshness keeper's state.
type keeper struct {
	pos         map[string]string          // change stream positions by handler
	ver         map[string]int64           // versions by handler
	programs    map[string]*program        // compiled filters by result id
	priceOffers map[string][]OfferQuantity // order lines by orderPrice id
	searches    []standing
	// searchesEpoch is standingEpoch when searches were read.
	searchesEpoch string
	initPending   bool
}

// maxPrograms bounds the compiled filters the keeper keeps.
const maxPrograms = 10000

// RunFresh (ServiceFresh) follows the change streams, invalidating results
// and notifying standing searches, until ctx ends (then nil). Copies are harmless.
func (s *Flow) RunFresh(ctx context.Context) error {
	k := &keeper{pos: map[string]string{}, ver: map[string]int64{}, programs: map[string]*program{}, priceOffers: map[string][]OfferQuantity{}}
	for ctx.Err() == nil {
		if err := s.freshStep(ctx, k); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "offer: freshness keeper step failed", "error", err)
			_ = tick.Sleep(ctx, s.cfg.FreshBlock)
		}
	}
	return nil
}

// freshStep reads and applies one batch of changes, then flushes the outbox.
func (s *Flow) freshStep(ctx context.Context, k *keeper) error {
	if len(k.pos) == 0 {
		pos, err := s.rdb.HGetAll(ctx, freshKey).Result()
		if err != nil {
			return fmt.Errorf("read position: %w", err)
		}
		for _, h := range s.cfg.Handlers {
			k.pos[h.Tag] = cmp.Or(pos[h.Tag], "0-0")
			if v, err := strconv.ParseInt(pos["v:"+h.Tag], 10, 64); err == nil {
				k.ver[h.Tag] = v
			}
		}
	}
	n := len(s.cfg.Handlers)
	streams := make([]string, 2*n) // the keys, then their positions
	for i, h := range s.cfg.Handlers {
		streams[i], streams[n+i] = changesKey(h.Tag), k.pos[h.Tag]
	}
	xs, err := s.rdb.XRead(ctx, &redis.XReadArgs{Streams: streams, Count: freshBatch, Block: s.cfg.FreshBlock}).Result()
	if errors.Is(err, redis.Nil) {
		// Idle: evaluate the standing searches created meanwhile.
		return errors.Join(s.percolate(ctx, k, nil, false), s.flushOutbox(ctx))
	}
	if err != nil {
		return fmt.Errorf("read changes: %w", err)
	}
	changes, err := s.readChanges(ctx, xs)
	if err != nil {
		return err
	}
	gap := false
	for _, c := range changes {
		// A hole in a handler's versions is changes trimmed unapplied.
		if v := k.ver[c.handler]; c.version != v+1 {
			gap = true
		}
		k.ver[c.handler] = c.version
	}
	if err := s.invalidate(ctx, k, changes, gap); err != nil {
		return err
	}
	if err := s.invalidatePrices(ctx, k, changes, gap); err != nil {
		return err
	}
	if err := s.percolate(ctx, k, changes, gap); err != nil {
		return err
	}
	for _, c := range changes {
		k.pos[c.handler] = c.entry
	}
	var fields []any
	for _, h := range s.cfg.Handlers {
		fields = append(fields, h.Tag, k.pos[h.Tag], "v:"+h.Tag, k.ver[h.Tag])
	}
	if err := s.rdb.HSet(ctx, freshKey, fields...).Err(); err != nil {
		return fmt.Errorf("record position: %w", err)
	}
	now := time.Now()
	for _, c := range changes {
		s.met.freshDelay.Record(ctx, max(0, now.Sub(c.at).Seconds()), metric.WithAttributes(keyHandler.String(c.handler)))
	}
	return s.flushOutbox(ctx)
}

// freshBatch bounds the changes one step reads per handler.
const freshBatch = 1000

// readChanges decodes a read of the change streams, with each offer now.
func (s *Flow) readChanges(ctx context.Context, xs []redis.XStream) ([]change, error) {
	var out []change
	pipe := s.rdb.Pipeline()
	var bodies []*redis.SliceCmd // one per stream with entries, in order
	for _, x := range xs {
		h := strings.TrimPrefix(x.Stream, catalogKey("changes")+":")
		ids := make([]string, len(x.Messages))
		for i, m := range x.Messages {
			ids[i], _ = m.Values["id"].(string)
			ms, _, _ := strings.Cut(m.ID, "-")
			at, _ := strconv.ParseInt(ms, 10, 64)
			epoch, _ := strconv.ParseInt(str(m.Values["e"]), 10, 64)
			out = append(out, change{handler: h, id: ids[i], entry: m.ID, version: changeVersion(m), epoch: epoch, at: time.UnixMilli(at)})
		}
		if len(ids) > 0 {
			bodies = append(bodies, pipe.HMGet(ctx, offersKey(h), ids...))
		}
	}
	if len(bodies) == 0 {
		return out, nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("read changed offers: %w", err)
	}
	i := 0
	for _, b := range bodies {
		for _, v := range b.Val() {
			if body, ok := v.(string); ok {
				out[i].offer = new(Offer)
				if err := json.Unmarshal([]byte(body), out[i].offer); err != nil {
					return nil, fmt.Errorf("decode offer %s: %w", out[i].id, err)
				}
			}
			i++
		}
	}
	return out, nil
}

// invalidateChunk is how many results one invalidate script checks.
const invalidateChunk = 200

// allEpochs is the epoch that invalidates every record: changes were lost.
const allEpochs = math.MaxInt64

// invalidate invalidates the live results the changes affect, or all.
func (s *Flow) invalidate(ctx context.Context, k *keeper, changes []change, all bool) error {
	nowMs := s.cfg.Now().UnixMilli()
	lives, err := readLive(ctx, s, s.cfg.liveKey, k.programs, maxPrograms, "logicalElement",
		func(id string) string { return s.cfg.resultKeys(id).main },
		func(v string) (*program, bool) {
			var e Element
			if err := json.Unmarshal([]byte(v), &e); err != nil || e.Validate() != nil {
				return nil, false // gone meanwhile: nothing to invalidate
			}
			p := compile(e)
			return &p, true
		})
	if err != nil {
		return fmt.Errorf("list live results: %w", err)
	}
	head := []any{nowMs, len(changes)}
	for _, c := range changes {
		head = append(head, c.id, c.handler, c.epoch)
	}
	calls := chunkCalls(lives, head, func(id string) ([]string, any, bool) {
		prog, ok := k.programs[id]
		if !ok {
			return nil, nil, false
		}
		forced := int64(allEpochs)
		if !all {
			forced = s.forcedEpoch(prog, changes)
		}
		rk := s.cfg.resultKeys(id)
		return []string{rk.main, rk.data, rk.waiting}, forced, true
	})
	cmds, _ := invalidateScript.RunAll(ctx, s.rdb, calls) // a failed load is each retried command's error
	for _, c := range cmds {
		n, err := c.Int64()
		if err != nil {
			return fmt.Errorf("invalidate: %w", err)
		}
		s.met.invalidated.Add(ctx, n)
	}
	return nil
}

// chunkCalls builds the calls of a script over each partition's live ids,
// at most invalidateChunk ids a call, whose Args start with head: add
// returns an id's keys and argument, or false to leave it out.
func chunkCalls(lives [][]string, head []any, add func(id string) ([]string, any, bool)) []script.Call {
	var calls []script.Call
	for _, l := range lives {
		n := 0
		for _, id := range l {
			keys, arg, ok := add(id)
			if !ok {
				continue
			}
			if n%invalidateChunk == 0 {
				calls = append(calls, script.Call{Args: slices.Clone(head)})
			}
			c := &calls[len(calls)-1]
			c.Keys, c.Args = append(c.Keys, keys...), append(c.Args, arg)
			n++
		}
	}
	return calls
}

// forcedEpoch is the epoch of the latest change whose offer matches prog, or 0.
func (s *Flow) forcedEpoch(prog *program, changes []change) int64 {
	var e int64
	for _, c := range changes {
		if c.offer == nil || c.epoch <= e {
			continue
		}
		kind, ok := s.cfg.kindOf(c.handler)
		if !ok {
			continue
		}
		if _, _, ok := prog.eval(c.offer, kind); ok {
			e = c.epoch
		}
	}
	return e
}

// CaughtUp reports whether the keeper has applied every change there is.
func (s *Flow) CaughtUp(ctx context.Context) (bool, error) {
	pipe := s.rdb.Pipeline()
	pos := pipe.HGetAll(ctx, freshKey)
	last := make([]*redis.XMessageSliceCmd, len(s.cfg.Handlers))
	for i, h := range s.cfg.Handlers {
		last[i] = pipe.XRevRangeN(ctx, changesKey(h.Tag), "+", "-", 1)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return false, fmt.Errorf("offer: keeper position: %w", err)
	}
	for i, h := range s.cfg.Handlers {
		if xs := last[i].Val(); len(xs) > 0 && pos.Val()[h.Tag] != xs[0].ID {
			return false, nil
		}
	}
	return true, nil
}

// readLive drops expired ids from the live indexes and returns the rest by
// partition, decoding new ones into cache (cleared past limit).
func readLive[T any](ctx context.Context, s *Flow, liveKey func(int) string, cache map[string]T, limit int,
	field string, key func(string) string, decode func(string) (T, bool)) ([][]string, error) {
	now := strconv.FormatInt(s.cfg.Now().UnixMilli(), 10)
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.StringSliceCmd, s.cfg.Partitions)
	for p := range s.cfg.Partitions {
		pipe.ZRemRangeByScore(ctx, liveKey(p), "-inf", now)
		cmds[p] = pipe.ZRange(ctx, liveKey(p), 0, -1)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	lives := make([][]string, len(cmds))
	pipe = s.rdb.Pipeline()
	reads := map[string]*redis.StringCmd{}
	for p, c := range cmds {
		lives[p] = c.Val()
		for _, id := range lives[p] {
			if _, ok := cache[id]; !ok && validResultID(id) {
				reads[id] = pipe.HGet(ctx, key(id), field)
			}
		}
	}
	if len(reads) > 0 {
		_, _ = pipe.Exec(ctx)
		if len(cache)+len(reads) > limit {
			clear(cache)
		}
		for id, cmd := range reads {
			if v, ok := decode(cmd.Val()); ok {
				cache[id] = v
			}
		}
	}
	return lives, nil
}
