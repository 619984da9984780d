package offer

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/rediskey"
	"github.com/dropstream/dropstream/internal/script"
	"github.com/dropstream/dropstream/internal/tenancy"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/subscriber"
)

// standingTag is the hash tag of every standing-search key, so one script
// updates a search's matches, version and outbox.
const standingTag = "{" + Name + ".standing}"

func standingKey(parts ...string) string {
	return rediskey.Key(standingTag, append([]string{"offer", "standing"}, parts...)...)
}

var (
	standingIndex  = standingKey("index")  // zset: search ids by creation ms
	standingEpoch  = standingKey("epoch")  // counter: creates and deletes
	standingOutbox = standingKey("outbox") // zset: "<id>|<version>" to notify, by ms
)

func standingMain(id string) string     { return standingKey("s", id) }
func standingMatches(id string) string  { return standingKey("s", id, "matches") }
func standingOwner(owner string) string { return standingKey("owner", owner) }

// validStandingID reports whether id is "ss_" and 16 lower-case hex digits.
var validStandingID = regexp.MustCompile(`^ss_[0-9a-f]{16}$`).MatchString

// Bounds of the standing searches of a deployment and of a name.
const (
	MaxStandingSearches   = 10000
	MaxStandingNameLength = 128
)

// EventSearchChanged is the notifier event of a changed standing search.
const EventSearchChanged = "offer.search.changed"

// ErrTooManyStanding: the deployment holds MaxStandingSearches.
var ErrTooManyStanding = errors.New("too many standing searches")

// StandingRequest creates a standing search: a filter whose result is kept
// current, with the notifier subscriber SubscriberID told of each change.
type StandingRequest struct {
	Name         string  `json:"name,omitempty"` // optional label, at most 128 characters
	SubscriberID string  `json:"subscriberId"`
	Filter       Element `json:"filter"`
}

// Validate checks the request's bounds and filter.
func (r StandingRequest) Validate() error {
	if len(r.Name) > MaxStandingNameLength || r.Name != "" && !validID(r.Name) {
		return fmt.Errorf("%w: name: want at most %d characters without control characters or '|'", ErrInvalidFilter, MaxStandingNameLength)
	}
	if !subscriber.ValidSubscriberID(r.SubscriberID) {
		return fmt.Errorf("%w: subscriberId: want a notifier subscriber id", ErrInvalidFilter)
	}
	return r.Filter.Validate()
}

// StandingSearch is a standing search and where its result stands.
type StandingSearch struct {
	ID           string    `json:"searchId"`
	Name         string    `json:"name,omitempty"`
	SubscriberID string    `json:"subscriberId"`
	Filter       Element   `json:"filter"`
	CreatedAt    time.Time `json:"createdAt"`
	// Version counts the result's changes; the first evaluation notifies no one.
	Version int64 `json:"version"`
	Total   int   `json:"total"` // matching offers at Version
	owner   string
}

// CreateStanding stores a standing search of owner for RunFresh to keep.
// Callers bound it (StandingQuota).
func (s *Flow) CreateStanding(ctx context.Context, owner string, req StandingRequest) (StandingSearch, error) {
	if err := req.Validate(); err != nil {
		return StandingSearch{}, err
	}
	n, err := s.rdb.ZCard(ctx, standingIndex).Result()
	if err != nil {
		return StandingSearch{}, fmt.Errorf("offer: standing searches: %w", err)
	}
	if n >= MaxStandingSearches {
		return StandingSearch{}, fmt.Errorf("%w: %d", ErrTooManyStanding, MaxStandingSearches)
	}
	_, canonical := ResultID(req.Filter)
	ss := StandingSearch{ID: "ss_" + randomID(), Name: req.Name, SubscriberID: req.SubscriberID, Filter: req.Filter,
		CreatedAt: s.cfg.Now().UTC().Truncate(time.Millisecond), owner: owner}
	ms := ss.CreatedAt.UnixMilli()
	tx := s.rdb.TxPipeline()
	tx.HSet(ctx, standingMain(ss.ID), "owner", owner, "name", req.Name, "subscriber", req.SubscriberID,
		"filter", string(canonical), "created", ms, "version", 0, "total", 0, "init", 1)
	tx.ZAdd(ctx, standingIndex, redis.Z{Score: float64(ms), Member: ss.ID})
	tx.SAdd(ctx, standingOwner(owner), ss.ID)
	tx.Incr(ctx, standingEpoch)
	if _, err := tx.Exec(ctx); err != nil {
		return StandingSearch{}, fmt.Errorf("offer: create standing search: %w", err)
	}
	return ss, nil
}

// CreateStandingIn is CreateStanding for v's tenant, whose subscriber
// must be one v sees (Config.Subscriber), else ErrNotFound.
func (s *Flow) CreateStandingIn(ctx context.Context, v tenancy.View, req StandingRequest) (StandingSearch, error) {
	if err := req.Validate(); err != nil {
		return StandingSearch{}, err
	}
	err := subscriber.ErrNotFound // without Config.Subscriber, no subscriber is seen
	if s.cfg.Subscriber != nil {
		err = s.cfg.Subscriber(ctx, v, req.SubscriberID)
	}
	if errors.Is(err, subscriber.ErrNotFound) {
		return StandingSearch{}, fmt.Errorf("%w: subscriber %s", ErrNotFound, req.SubscriberID)
	}
	if err != nil {
		return StandingSearch{}, fmt.Errorf("offer: subscriber of a standing search: %w", err)
	}
	return s.CreateStanding(ctx, v.Owner(), req)
}

// GetStanding returns the standing search id when v sees it, else ErrNotFound.
func (s *Flow) GetStanding(ctx context.Context, v tenancy.View, id string) (StandingSearch, error) {
	if !validStandingID(id) {
		return StandingSearch{}, ErrNotFound
	}
	m, err := s.rdb.HGetAll(ctx, standingMain(id)).Result()
	if err != nil {
		return StandingSearch{}, fmt.Errorf("offer: standing search %s: %w", id, err)
	}
	if len(m) == 0 || !v.Sees(m["owner"]) {
		return StandingSearch{}, ErrNotFound
	}
	return decodeStanding(id, m)
}

func decodeStanding(id string, m map[string]string) (StandingSearch, error) {
	ss := StandingSearch{ID: id, Name: m["name"], SubscriberID: m["subscriber"], owner: m["owner"]}
	if err := json.Unmarshal([]byte(m["filter"]), &ss.Filter); err != nil {
		return StandingSearch{}, fmt.Errorf("offer: standing search %s: filter: %w", id, err)
	}
	ms, _ := strconv.ParseInt(m["created"], 10, 64)
	ss.CreatedAt = time.UnixMilli(ms).UTC()
	ss.Version, _ = strconv.ParseInt(m["version"], 10, 64)
	ss.Total, _ = strconv.Atoi(m["total"])
	return ss, nil
}

// ListStanding returns every standing search v sees.
func (s *Flow) ListStanding(ctx context.Context, v tenancy.View) ([]StandingSearch, error) {
	var ids []string
	var err error
	if v.All {
		ids, err = s.rdb.ZRange(ctx, standingIndex, 0, -1).Result()
	} else {
		ids, err = s.rdb.SMembers(ctx, standingOwner(v.Owner())).Result()
	}
	if err != nil {
		return nil, fmt.Errorf("offer: standing searches: %w", err)
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HGetAll(ctx, standingMain(id))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("offer: standing searches: %w", err)
	}
	out := make([]StandingSearch, 0, len(ids))
	for i, id := range ids {
		m := cmds[i].Val()
		if len(m) == 0 || !v.Sees(m["owner"]) {
			continue
		}
		ss, err := decodeStanding(id, m)
		if err != nil {
			return nil, err
		}
		out = append(out, ss)
	}
	return out, nil
}

// DeleteStanding removes the standing search id when v sees it, else ErrNotFound.
func (s *Flow) DeleteStanding(ctx context.Context, v tenancy.View, id string) error {
	ss, err := s.GetStanding(ctx, v, id)
	if err != nil {
		return err
	}
	tx := s.rdb.TxPipeline()
	tx.Del(ctx, standingMain(id), standingMatches(id))
	tx.ZRem(ctx, standingIndex, id)
	tx.SRem(ctx, standingOwner(ss.owner), id)
	tx.Incr(ctx, standingEpoch)
	if _, err := tx.Exec(ctx); err != nil {
		return fmt.Errorf("offer: delete standing search %s: %w", id, err)
	}
	return nil
}

// percolateScript applies a standing search's matches and, on a change,
// bumps the version and files it in the outbox. KEYS main, matches,
// outbox; ARGV now ms, mode ("delta", "full", or "init": full without a
// notification), search id, then (offer id, encoded match or "") pairs.
// Replies the new version, or 0 when nothing changed.
var percolateScript = script.New(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local mode = ARGV[2]
-- Evaluated first by another keeper meanwhile: its result stands, and
-- later deltas bring it forward.
if mode == 'init' and redis.call('HEXISTS', KEYS[1], 'init') == 0 then return 0 end
local changed = false
local seen = {}
for i = 4, #ARGV, 2 do
  local id, enc = ARGV[i], ARGV[i + 1]
  seen[id] = true
  local cur = redis.call('HGET', KEYS[2], id)
  if enc == '' then
    if cur then redis.call('HDEL', KEYS[2], id); changed = true end
  elseif cur ~= enc then
    redis.call('HSET', KEYS[2], id, enc); changed = true
  end
end
if mode ~= 'delta' then
  for _, id in ipairs(redis.call('HKEYS', KEYS[2])) do
    if not seen[id] then redis.call('HDEL', KEYS[2], id); changed = true end
  end
  redis.call('HDEL', KEYS[1], 'init')
end
if not changed and mode ~= 'init' then return 0 end
local v = redis.call('HINCRBY', KEYS[1], 'version', 1)
redis.call('HSET', KEYS[1], 'total', redis.call('HLEN', KEYS[2]))
if mode ~= 'init' then redis.call('ZADD', KEYS[3], ARGV[1], ARGV[3] .. '|' .. v) end
return v`)

// standing is a standing search as the keeper holds it.
type standing struct {
	id   string
	prog program
	init bool
}

// loadStanding rereads the standing searches when the epoch moved.
func (s *Flow) loadStanding(ctx context.Context, k *keeper) error {
	epoch, err := s.rdb.Get(ctx, standingEpoch).Result() // "" before the first create
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("standing searches: %w", err)
	}
	if epoch == k.searchesEpoch && !k.initPending {
		return nil
	}
	ids, err := s.rdb.ZRange(ctx, standingIndex, 0, MaxStandingSearches-1).Result()
	if err != nil {
		return fmt.Errorf("standing searches: %w", err)
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HMGet(ctx, standingMain(id), "filter", "init")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("standing searches: %w", err)
	}
	k.searches = k.searches[:0]
	k.initPending = false
	for i, id := range ids {
		v := cmds[i].Val()
		var e Element
		if json.Unmarshal([]byte(str(v[0])), &e) != nil || e.Validate() != nil {
			continue // deleted meanwhile
		}
		init := str(v[1]) == "1"
		k.searches = append(k.searches, standing{id: id, prog: compile(e), init: init})
		k.initPending = k.initPending || init
	}
	k.searchesEpoch = epoch
	return nil
}

// percolate re-evaluates the standing searches: new ones (or all, when
// changes were lost) over every offer, the others over the changed ones.
func (s *Flow) percolate(ctx context.Context, k *keeper, changes []change, all bool) error {
	if err := s.loadStanding(ctx, k); err != nil {
		return err
	}
	if len(k.searches) == 0 {
		return nil
	}
	// Each changed offer's body under whichever handler holds it now.
	type state struct {
		o    *Offer
		kind Kind
	}
	now := map[string]state{}
	for _, c := range changes {
		st := now[c.id]
		if c.offer != nil {
			st.o = c.offer
			st.kind, _ = s.cfg.kindOf(c.handler)
		}
		now[c.id] = st
	}
	nowMs := s.cfg.Now().UnixMilli()
	var calls []script.Call
	for i := range k.searches {
		ss := &k.searches[i]
		keys := []string{standingMain(ss.id), standingMatches(ss.id), standingOutbox}
		if ss.init || all {
			args, err := s.fullResult(ctx, &ss.prog)
			if err != nil {
				return err
			}
			mode := "full"
			if ss.init {
				mode = "init"
			}
			calls = append(calls, script.Call{Keys: keys, Args: append([]any{nowMs, mode, ss.id}, args...)})
			ss.init = false
			continue
		}
		if len(now) == 0 {
			continue
		}
		args := []any{nowMs, "delta", ss.id}
		for id, st := range now {
			enc := ""
			if st.o != nil {
				if m, _, ok := ss.prog.eval(st.o, st.kind); ok {
					enc = encodeMatch(m)
				}
			}
			args = append(args, id, enc)
		}
		calls = append(calls, script.Call{Keys: keys, Args: args})
	}
	cmds, _ := percolateScript.RunAll(ctx, s.rdb, calls) // a failed load is each retried command's error
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			return fmt.Errorf("percolate: %w", err)
		}
	}
	return nil
}

// fullResult evaluates prog over every offer: (offer id, match) pairs.
func (s *Flow) fullResult(ctx context.Context, prog *program) ([]any, error) {
	var out []any
	for _, h := range s.cfg.Handlers {
		ms, err := s.views[h.Tag].evaluate(ctx, prog, h.Kind)
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			out = append(out, m.match.OfferID, encodeMatch(m.match))
		}
	}
	return out, nil
}

// outboxBatch bounds the notifications one flush publishes.
const outboxBatch = 100

// flushOutbox publishes the outbox through Config.Notify, one request per
// (search, version), and empties it. The notifier delivers a window once,
// so republishing after a crash is harmless.
func (s *Flow) flushOutbox(ctx context.Context) error {
	members, err := s.rdb.ZRange(ctx, standingOutbox, 0, outboxBatch-1).Result()
	if err != nil || len(members) == 0 {
		return err
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(members))
	for i, m := range members {
		id, _, _ := strings.Cut(m, "|")
		cmds[i] = pipe.HMGet(ctx, standingMain(id), "subscriber", "name", "total")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	var reqs []notifier.Request
	for i, m := range members {
		id, vs, _ := strings.Cut(m, "|")
		v := cmds[i].Val()
		sub := str(v[0])
		if sub == "" || s.cfg.Notify == nil {
			continue // deleted meanwhile, or no notifier: nothing to tell
		}
		name, total := cmp.Or(str(v[1]), id), str(v[2])
		body, _ := json.Marshal(map[string]any{"searchId": id, "version": vs, "total": total})
		reqs = append(reqs, notifier.Request{Flow: Name, Event: EventSearchChanged, Subject: "offer search " + id,
			SubscriberID: sub, Window: "v" + vs, Title: "Offer search " + name + " changed",
			Text:    "The result of offer search " + name + " changed: " + total + " offers match now (version " + vs + ").",
			Payload: body, ObservedAt: s.cfg.Now().UTC(), EventID: m})
	}
	if len(reqs) > 0 {
		if err := s.cfg.Notify(ctx, reqs...); err != nil {
			return fmt.Errorf("outbox: notify: %w", err)
		}
		s.met.percolated.Add(ctx, int64(len(reqs)))
	}
	return s.rdb.ZRem(ctx, standingOutbox, members).Err() // go-redis spreads a []string
}
