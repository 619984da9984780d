package comic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	gotel "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/dropstream/dropstream/stream"
)

// StageMatcher is the name of the matching stage.
const StageMatcher = "comic-matcher"

// Request is one pending notification: the payload of a TypeNotify
// message, everything a notifier needs to deliver it once.
type Request struct {
	// BusinessKey is "comic:<comic id>:<email hash>": one delivery per
	// (subscriber, comic), whatever the number of matching subscriptions,
	// jobs or redeliveries.
	BusinessKey string `json:"business_key"`
	ComicID     string `json:"comic_id"`
	Gen         int64  `json:"gen"`
	Email       string `json:"email"`
	// SubscriptionID is the subscription that matched (the smallest id
	// when several of the email's subscriptions match).
	SubscriptionID string `json:"subscription_id"`
	// Destination is the subscriber's own POST /notify URL, or "" for the
	// flow's destination (Config.NotifyURL).
	Destination string `json:"destination,omitempty"`
	// Payload is the body sent to the destination (NotifyBody as JSON).
	Payload json.RawMessage `json:"payload"`
	// ListedAtMs is when the comic was listed (end-to-end latency).
	ListedAtMs int64 `json:"listed_at_ms"`
}

// NotifyBody is what POST /notify receives: the seed's {comic, email},
// with the comic's id and the subscription that matched.
type NotifyBody struct {
	Event          string          `json:"event"`
	ComicID        string          `json:"comic_id"`
	Comic          json.RawMessage `json:"comic"`
	Email          string          `json:"email"`
	SubscriptionID string          `json:"subscription_id"`
}

// EventComicListed is NotifyBody.Event.
const EventComicListed = "comic.listed"

// Handoff hands a job's pending notifications to a notifier. Handing off
// must be idempotent per (job, email): a redelivered job hands off again.
type Handoff interface {
	Handoff(ctx context.Context, job Job, reqs []Request) (int, error)
}

// handoffChunk bounds the requests of one handoff script.
const handoffChunk = 500

// streamHandoff records pending notifications and publishes them on the
// notify topic in one script per chunk, skipping emails already notified
// or pending for the comic; the last chunk marks the job matched. A
// redelivered job therefore publishes nothing twice.
type streamHandoff struct {
	rdb    redis.UniversalClient
	topics Topics
	prop   propagation.TextMapPropagator
	chunk  int // requests per script, handoffChunk by default
}

// handoffScript: KEYS jobdone, pending, notified, notify stream; ARGV gen,
// last chunk (0/1), comic id, number of metadata pairs, metadata pairs,
// then email/payload pairs.
var handoffScript = redis.NewScript(`
local gen = tonumber(ARGV[1])
if tonumber(redis.call('GET', KEYS[1]) or '0') >= gen then return -1 end
local nmeta = tonumber(ARGV[4])
local meta = {}
for i = 5, 4 + 2 * nmeta do meta[#meta + 1] = ARGV[i] end
local n = 0
for i = 5 + 2 * nmeta, #ARGV, 2 do
  local email = ARGV[i]
  if redis.call('HEXISTS', KEYS[3], email) == 0 and redis.call('HEXISTS', KEYS[2], email) == 0 then
    redis.call('HSET', KEYS[2], email, ARGV[i + 1])
    local f = {'key', ARGV[3], 'type', 'comic.notify', 'payload', ARGV[i + 1]}
    for _, v in ipairs(meta) do f[#f + 1] = v end
    redis.call('XADD', KEYS[4], '*', unpack(f))
    n = n + 1
  end
end
if ARGV[2] == '1' then redis.call('SET', KEYS[1], gen) end
return n`)

func (h *streamHandoff) Handoff(ctx context.Context, job Job, reqs []Request) (int, error) {
	tag := h.topics.tag(job.ComicID)
	keys := []string{jobDoneKey(tag, job.ComicID), pendingKey(tag, job.ComicID), notifiedKey(tag, job.ComicID),
		h.topics.Notify.Stream(h.topics.Notify.Partition(job.ComicID))}
	meta := traceArgs(ctx, h.prop)
	total := 0
	size := h.chunk
	if size <= 0 {
		size = handoffChunk
	}
	for start := 0; start == 0 || start < len(reqs); start += size {
		chunk := reqs[start:min(start+size, len(reqs))]
		last := "0"
		if start+size >= len(reqs) {
			last = "1"
		}
		args := append([]any{job.Gen, last, job.ComicID, len(meta) / 2}, meta...)
		for _, r := range chunk {
			raw, _ := json.Marshal(r)
			args = append(args, r.Email, raw)
		}
		n, err := handoffScript.Run(ctx, h.rdb, keys, args...).Int()
		if err != nil {
			return total, fmt.Errorf("comic: hand off job %s/%d: %w", job.ComicID, job.Gen, err)
		}
		if n < 0 {
			return total, nil // matched before: a redelivery
		}
		total += n
	}
	return total, nil
}

// Matcher matches a comic against the subscriptions: it expands only the
// SearchPatterns (and their shards) that have at least one subscription,
// looks up each one's index set for the comic's values, and hands one
// request per matching email to the Handoff.
type Matcher struct {
	rdb     redis.UniversalClient
	topics  Topics
	handoff Handoff
	prop    propagation.TextMapPropagator
	shards  shardCache
}

// matchConcurrency bounds the jobs of one batch matched at once: each job
// waits on a few Redis round trips, so a batch is matched concurrently.
const matchConcurrency = 32

// NewMatcher returns a matcher handing off to h; nil h publishes on the
// flow's notify topic.
func NewMatcher(rdb redis.UniversalClient, topics Topics, h Handoff, prop propagation.TextMapPropagator) *Matcher {
	if h == nil {
		h = &streamHandoff{rdb: rdb, topics: topics, prop: prop}
	}
	if prop == nil {
		prop = gotel.GetTextMapPropagator()
	}
	return &Matcher{rdb: rdb, topics: topics, handoff: h, prop: prop}
}

// Stage returns the matching stage over the jobs topic. The jobs of a
// batch are matched concurrently (matchConcurrency at a time), each in its
// producer's trace, and settled one by one: a failed job is retried alone.
func (m *Matcher) Stage() stream.Stage {
	return stream.Stage{Name: StageMatcher, Topic: m.topics.Jobs, BatchHandler: m.handleBatch}
}

func (m *Matcher) handleBatch(ctx context.Context, msgs []*stream.Message) error {
	errs := make([]error, len(msgs))
	sem := make(chan struct{}, matchConcurrency)
	var wg sync.WaitGroup
	for i, msg := range msgs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = m.handle(stream.ExtractTrace(ctx, m.prop, msg), msg)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return &stream.BatchError{Errs: errs}
		}
	}
	return nil
}

func (m *Matcher) handle(ctx context.Context, msg *stream.Message) error {
	var job Job
	if err := json.Unmarshal(msg.Payload, &job); err != nil {
		return stream.Permanentf("comic: decode job: %w", err)
	}
	c, err := ParseComic(job.Comic)
	if err != nil || c.ID() != job.ComicID || job.Gen < 1 {
		return stream.Permanentf("comic: job %s/%d carries an invalid comic: %v", clipName(job.ComicID), job.Gen, err)
	}
	// A redelivered job that was matched before is matched again, and the
	// handoff script, which checks the job mark, writes nothing.
	reqs, err := m.Match(ctx, c, job)
	if err != nil {
		return err
	}
	_, err = m.handoff.Handoff(ctx, job, reqs)
	return err
}

// Match returns one request per email with a subscription matching c,
// ordered by email.
func (m *Matcher) Match(ctx context.Context, c Comic, job Job) ([]Request, error) {
	ids, err := m.MatchIDs(ctx, c)
	if err != nil {
		return nil, err
	}
	byEmail := map[string]Subscription{}
	for start := 0; start < len(ids); start += 1000 {
		subs, err := (&Store{rdb: m.rdb}).load(ctx, ids[start:min(start+1000, len(ids))])
		if err != nil {
			return nil, err
		}
		for _, s := range subs {
			if cur, ok := byEmail[s.Email]; !ok || s.ID < cur.ID {
				byEmail[s.Email] = s
			}
		}
	}
	out := make([]Request, 0, len(byEmail))
	canonical := c.Canonical()
	for email, s := range byEmail {
		body, _ := json.Marshal(NotifyBody{Event: EventComicListed, ComicID: job.ComicID, Comic: canonical, Email: email, SubscriptionID: s.ID})
		out = append(out, Request{BusinessKey: "comic:" + job.ComicID + ":" + hashHex([]byte(email)), ComicID: job.ComicID,
			Gen: job.Gen, Email: email, SubscriptionID: s.ID, Destination: s.NotifyURL, Payload: body, ListedAtMs: job.AddedAtMs})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Email < out[j].Email })
	return out, nil
}

// shardCacheMaxAge bounds how long the matcher trusts its list of active
// pattern shards without rereading it, even when the version counter says
// nothing changed (a guard against writers that do not bump it).
const shardCacheMaxAge = 10 * time.Second

// shardCache is the matcher's copy of the active pattern shards and the
// version counter (patVersionKey) it was read at.
type shardCache struct {
	mu      sync.Mutex
	version string
	shards  []string
	readAt  time.Time
}

func (c *shardCache) get(now time.Time) (shards []string, version string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.readAt.IsZero() || now.Sub(c.readAt) > shardCacheMaxAge {
		return nil, "", false
	}
	return c.shards, c.version, true
}

func (c *shardCache) set(shards []string, version string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.shards, c.version, c.readAt = shards, version, now
}

// MatchIDs returns the ids of the subscriptions matching c, sorted. It
// expands only the pattern shards that have at least one subscription.
// In the steady state it is one pipeline: the version of the set of
// active shards, and one index lookup per active shard (from the
// matcher's cached list); when the version moved, the list is read again
// and the lookups redone.
func (m *Matcher) MatchIDs(ctx context.Context, c Comic) ([]string, error) {
	b := c.Body()
	if shards, version, ok := m.shards.get(time.Now()); ok {
		ids, current, err := m.lookup(ctx, b, shards)
		if err != nil {
			return nil, err
		}
		if current == version {
			return ids, nil
		}
	}
	pipe := m.rdb.Pipeline()
	ver := pipe.Get(ctx, patVersionKey)
	active := pipe.ZRangeByScore(ctx, patternsKey, &redis.ZRangeBy{Min: "1", Max: "+inf"})
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("comic: active patterns: %w", err)
	}
	m.shards.set(active.Val(), ver.Val(), time.Now())
	ids, _, err := m.lookup(ctx, b, active.Val())
	return ids, err
}

// lookup reads the version of the active shards and the index set of b's
// values in each of shards, in one pipeline, and returns the distinct ids
// sorted.
func (m *Matcher) lookup(ctx context.Context, b Body, shards []string) ([]string, string, error) {
	pipe := m.rdb.Pipeline()
	ver := pipe.Get(ctx, patVersionKey)
	cmds := make([]*redis.StringSliceCmd, 0, len(shards))
	hashes := map[string]string{}
	for _, shard := range shards {
		p := patternOfShard(shard)
		vh, ok := hashes[p]
		if !ok {
			vh = valuesHash(b, splitPattern(p))
			hashes[p] = vh
		}
		cmds = append(cmds, pipe.SMembers(ctx, indexKey(shard, vh)))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, "", fmt.Errorf("comic: index lookups: %w", err)
	}
	var ids []string
	for _, cmd := range cmds {
		ids = append(ids, cmd.Val()...)
	}
	sort.Strings(ids)
	return slices.Compact(ids), ver.Val(), nil
}
