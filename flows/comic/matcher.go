package comic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/redis/go-redis/v9"
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
}

// NewMatcher returns a matcher handing off to h; nil h publishes on the
// flow's notify topic.
func NewMatcher(rdb redis.UniversalClient, topics Topics, h Handoff, prop propagation.TextMapPropagator) *Matcher {
	if h == nil {
		h = &streamHandoff{rdb: rdb, topics: topics, prop: prop}
	}
	return &Matcher{rdb: rdb, topics: topics, handoff: h}
}

// Stage returns the matching stage over the jobs topic.
func (m *Matcher) Stage() stream.Stage {
	return stream.Stage{Name: StageMatcher, Topic: m.topics.Jobs, Handler: m.handle}
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
	tag := m.topics.tag(job.ComicID)
	done, err := m.rdb.Get(ctx, jobDoneKey(tag, job.ComicID)).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("comic: job state: %w", err)
	}
	if done >= job.Gen {
		return nil // matched before this redelivery
	}
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

// MatchIDs returns the ids of the subscriptions matching c, sorted: one
// read of the active pattern shards, then one pipeline of index lookups,
// one per active shard.
func (m *Matcher) MatchIDs(ctx context.Context, c Comic) ([]string, error) {
	shards, err := m.rdb.ZRangeByScore(ctx, patternsKey, &redis.ZRangeBy{Min: "1", Max: "+inf"}).Result()
	if err != nil {
		return nil, fmt.Errorf("comic: active patterns: %w", err)
	}
	if len(shards) == 0 {
		return nil, nil
	}
	b := c.Body()
	pipe := m.rdb.Pipeline()
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
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("comic: index lookups: %w", err)
	}
	seen := map[string]struct{}{}
	var ids []string
	for _, cmd := range cmds {
		for _, id := range cmd.Val() {
			if _, dup := seen[id]; !dup {
				seen[id] = struct{}{}
				ids = append(ids, id)
			}
		}
	}
	sort.Strings(ids)
	return ids, nil
}
