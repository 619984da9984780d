package comic

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	gotel "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"golang.org/x/sync/errgroup"

	"github.com/dropstream/dropstream/stream"
)

// StageMatcher is the name of the matching stage.
const StageMatcher = "comic-matcher"

// Request is a TypeNotify payload: one wave of a listing's notifications.
type Request struct {
	ComicID    string          `json:"comic_id"`
	Gen        int64           `json:"gen"`
	Wave       int             `json:"wave"`
	ListedAtMs int64           `json:"listed_at_ms"`
	Comic      json.RawMessage `json:"comic"` // canonical
	// SubscriptionIDs are 1..MaxRequestBatch matching subscriptions.
	SubscriptionIDs []string `json:"subscription_ids"`
}

// MaxRequestBatch bounds the subscriptions of one Request, which is
// delivered and retried as a whole.
const MaxRequestBatch = 100

// NotifyBody is what POST /notify receives.
type NotifyBody struct {
	Event          string          `json:"event"`
	ComicID        string          `json:"comic_id"`
	Comic          json.RawMessage `json:"comic"`
	Email          string          `json:"email"`
	SubscriptionID string          `json:"subscription_id"`
	// HoldToken proves the hold at POST /v1/completetransaction, for
	// HoldSeconds from this notification.
	HoldToken   string `json:"hold_token,omitempty"`
	HoldSeconds int64  `json:"hold_seconds,omitempty"`
}

// EventComicListed is NotifyBody.Event.
const EventComicListed = "comic.listed"

// Handoff records a job's pending notifications and hands them to the
// delivery, idempotently per (job, subscription).
type Handoff interface {
	Handoff(ctx context.Context, job Job, ids []string) (int, error)
}

// handoffChunk bounds the subscriptions of one handoff script, so no
// script holds Redis long.
const handoffChunk = 500

// streamHandoff enters a job's matches in the listing's lottery, one
// script per chunk; the last chunk marks the job matched and tells the
// first wave. Chunks are idempotent, so a killed copy's prefix is safe.
type streamHandoff struct {
	rdb    redis.UniversalClient
	topics Topics
	prop   propagation.TextMapPropagator
	holds  *Holds
	chunk  int // subscriptions per script, handoffChunk by default
}

// handoffScript: KEYS tellLua's k, then jobdone; ARGV gen, last chunk
// (0/1), comic id, salt, wave size, default window ms, now ms, metadata
// pair count, the pairs, then (score, subscription id) pairs. A new gen
// resets the hold. Returns the subscriptions told; -1: matched before.
var handoffScript = redis.NewScript(tellLua + `
local gen = tonumber(ARGV[1])
if tonumber(redis.call('GET', KEYS[7]) or '0') >= gen then return -1 end
if redis.call('HGET', KEYS[1], 'gen') ~= ARGV[1] then
  local w = tonumber(redis.call('HGET', KEYS[3], 'hold_ms') or '0')
  if w <= 0 then w = ARGV[6] end
  redis.call('DEL', KEYS[1], KEYS[2])
  redis.call('HSET', KEYS[1], 'gen', gen, 'salt', ARGV[4], 'size', ARGV[5], 'window', w, 'wave', 0, 'ends', 0)
end
local nmeta = tonumber(ARGV[8])
for i = 9 + 2 * nmeta, #ARGV, 2 do redis.call('ZADD', KEYS[2], ARGV[i], ARGV[i + 1]) end
if ARGV[2] ~= '1' then return 0 end
redis.call('SET', KEYS[7], gen)
local meta = {}
for i = 9, 8 + 2 * nmeta do meta[#meta + 1] = ARGV[i] end
return tell(KEYS, ARGV[3], 1, tonumber(ARGV[7]), meta)`)

func (h *streamHandoff) Handoff(ctx context.Context, job Job, ids []string) (int, error) {
	size := cmp.Or(h.chunk, handoffChunk)
	total := 0
	for start := 0; start == 0 || start < len(ids); start += size {
		n, err := h.handoffChunk(ctx, job, ids[start:min(start+size, len(ids))], start+size >= len(ids))
		if err != nil {
			return total, err
		}
		if n < 0 {
			return total, nil // matched before: a redelivery
		}
		total += n
	}
	return total, nil
}

// handoffChunk runs handoffScript on a chunk; -1: matched before.
func (h *streamHandoff) handoffChunk(ctx context.Context, job Job, ids []string, last bool) (int, error) {
	keys := append(h.holds.waveKeys(job.ComicID), jobDoneKey(h.topics.tag(job.ComicID), job.ComicID))
	meta := traceArgs(ctx, h.prop)
	cfg := h.holds.cfg
	args := make([]any, 0, 8+len(meta)+2*len(ids))
	args = append(args, job.Gen, last, job.ComicID, newSalt(), cfg.WaveSize, cfg.Window.Milliseconds(), h.holds.now().UnixMilli(), len(meta)/2)
	args = append(args, meta...)
	for _, id := range ids {
		args = append(args, lotteryScore(job.ComicID, job.Gen, id), id)
	}
	n, err := handoffScript.Run(ctx, h.rdb, keys, args...).Int()
	if err != nil {
		return 0, fmt.Errorf("comic: hand off job %s/%d: %w", job.ComicID, job.Gen, err)
	}
	return n, nil
}

// Matcher looks a comic up in each active SearchPattern's index sets and
// hands the matching ids to the Handoff, loading no subscription.
type Matcher struct {
	rdb      redis.UniversalClient
	topics   Topics
	handoff  Handoff
	prop     propagation.TextMapPropagator
	index    atomic.Pointer[activeIndex]
	examined atomic.Int64 // see Examined
}

// matchConcurrency bounds the jobs of one batch matched at once.
const matchConcurrency = 32

// matcherBatch keeps a batch of popular comics' jobs within the handler
// timeout.
const matcherBatch = 64

// NewMatcher returns a matcher handing off to h.
func NewMatcher(rdb redis.UniversalClient, topics Topics, h Handoff, prop propagation.TextMapPropagator) *Matcher {
	prop = cmp.Or(prop, gotel.GetTextMapPropagator())
	return &Matcher{rdb: rdb, topics: topics, handoff: h, prop: prop}
}

// Stage returns the matching stage: a batch's jobs run concurrently, and
// a failed job is retried alone.
func (m *Matcher) Stage() stream.Stage {
	return stream.Stage{Name: StageMatcher, Topic: m.topics.Jobs, BatchHandler: m.handleBatch,
		Config: stream.RunnerConfig{BatchSize: matcherBatch}}
}

func (m *Matcher) handleBatch(ctx context.Context, msgs []*stream.Message) error {
	errs := make([]error, len(msgs))
	var g errgroup.Group
	g.SetLimit(matchConcurrency)
	for i, msg := range msgs {
		g.Go(func() error {
			var job Job
			if errs[i] = json.Unmarshal(msg.Payload, &job); errs[i] != nil {
				errs[i] = stream.Permanentf("comic: decode job: %w", errs[i])
			} else {
				_, errs[i] = m.Process(stream.ExtractTrace(ctx, m.prop, msg), job)
			}
			return nil
		})
	}
	_ = g.Wait() // each job's error is in errs
	if slices.ContainsFunc(errs, func(err error) bool { return err != nil }) {
		return &stream.BatchError{Errs: errs}
	}
	return nil
}

// Process matches a job and returns how many notifications it handed off
// now; an invalid comic is a permanent error.
func (m *Matcher) Process(ctx context.Context, job Job) (int, error) {
	c, err := ParseComic(job.Comic)
	if err != nil || c.ID() != job.ComicID || job.Gen < 1 {
		return 0, stream.Permanentf("comic: job %s/%d carries an invalid comic: %v", clipName(job.ComicID), job.Gen, err)
	}
	job.Comic = c.Canonical()
	ids, err := m.MatchIDs(ctx, c)
	if err != nil {
		return 0, err
	}
	return m.handoff.Handoff(ctx, job, ids)
}

// indexMaxAge bounds how long the matcher trusts its cached index, in
// case a writer does not bump the version.
const indexMaxAge = 10 * time.Second

// activeIndex caches the active patterns and shards at a version.
type activeIndex struct {
	version  string
	patterns [][]string     // the field names of each active pattern
	names    []string       // the active patterns
	bloat    map[string]int // bloatField → shards past the first
	readAt   time.Time
}

// MatchIDs returns the ids of the subscriptions matching c, once each,
// usually in one pipeline; a moved version rereads the index.
func (m *Matcher) MatchIDs(ctx context.Context, c Comic) ([]string, error) {
	b := c.Body()
	if idx := m.index.Load(); idx != nil && time.Since(idx.readAt) <= indexMaxAge {
		ids, version, err := m.lookup(ctx, b, idx)
		if err != nil || version == idx.version {
			return ids, err
		}
	}
	idx, err := m.readIndex(ctx)
	if err != nil {
		return nil, err
	}
	ids, _, err := m.lookup(ctx, b, idx)
	return ids, err
}

// readIndex reads and caches the index, the version first, so a
// concurrent change shows next time.
func (m *Matcher) readIndex(ctx context.Context) (*activeIndex, error) {
	pipe := m.rdb.Pipeline()
	ver := pipe.Get(ctx, patVersionKey)
	active := pipe.ZRangeByScore(ctx, patternsKey, &redis.ZRangeBy{Min: "1", Max: "+inf"})
	bloat := pipe.HGetAll(ctx, bloatKey)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("comic: active patterns: %w", err)
	}
	idx := &activeIndex{version: ver.Val(), names: active.Val(), bloat: map[string]int{}, readAt: time.Now()}
	for _, p := range idx.names {
		idx.patterns = append(idx.patterns, splitPattern(p))
	}
	for f, v := range bloat.Val() {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			idx.bloat[f] = n
		}
	}
	m.index.Store(idx)
	return idx, nil
}

// lookup reads, in one pipeline, the index version and b's entries in each
// pattern of idx: an exact pattern's set, or the ranged members whose
// score b's value reaches, filtered by their bounds.
func (m *Matcher) lookup(ctx context.Context, b Body, idx *activeIndex) ([]string, string, error) {
	pipe := m.rdb.Pipeline()
	ver := pipe.Get(ctx, patVersionKey)
	cmds := make([]*redis.StringSliceCmd, 0, len(idx.names))
	queries := make([]*rangeQuery, 0, len(idx.names))
	for i, p := range idx.names {
		q, ok := queryOf(b, idx.patterns[i])
		if !ok {
			continue
		}
		vh := valuesHash(b, idx.patterns[i])
		for k := 0; k <= idx.bloat[bloatField(p, vh)]; k++ {
			if q == nil {
				cmds = append(cmds, pipe.SMembers(ctx, indexKey(p, vh, k)))
			} else {
				cmds = append(cmds, pipe.ZRangeByScore(ctx, indexKey(p, vh, k), &redis.ZRangeBy{Min: q.min, Max: q.max}))
			}
			queries = append(queries, q)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, "", fmt.Errorf("comic: index lookups: %w", err)
	}
	n := 0
	for _, cmd := range cmds {
		n += len(cmd.Val())
	}
	m.examined.Add(int64(n))
	// A subscription is in exactly one index: the ids are distinct.
	ids := make([]string, 0, n)
	for i, cmd := range cmds {
		if queries[i] == nil {
			ids = append(ids, cmd.Val()...)
			continue
		}
		for _, member := range cmd.Val() {
			if id, ok := queries[i].matches(member); ok {
				ids = append(ids, id)
			}
		}
	}
	return ids, ver.Val(), nil
}

// Examined returns how many index entries the matcher's lookups have read.
func (m *Matcher) Examined() int64 { return m.examined.Load() }
