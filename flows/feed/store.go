package feed

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/recordstore"
	"github.com/dropstream/dropstream/internal/tenancy"
)

// MaxSubscribables bounds one tenant's subscribables on a feed; every poll
// hands them all to the assignment script.
const MaxSubscribables = 100

// putSubscribable adds a subscribable (ARGV key, JSON) unless the key is
// taken (0) or tenant ARGV[4] has name ARGV[3] there already (-1).
var putSubscribable = redis.NewScript(`
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 0 end
local n = 0
for _, k in ipairs(redis.call('HKEYS', KEYS[1])) do
  local dot = string.find(k, '.', 1, true)
  if (dot and string.sub(k, 1, dot - 1) or '') == ARGV[4] then n = n + 1 end
end
if n >= tonumber(ARGV[3]) then return -1 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1`)

// Store keeps feeds, subscribables and subscriptions in Redis (layout in
// keys.go). It is safe for concurrent use.
type Store struct {
	rdb    redis.UniversalClient
	topics Topics
	now    func() time.Time
	feeds  *recordstore.Store[Feed]
}

// NewStore returns a store over rdb for the flow's topics.
func NewStore(rdb redis.UniversalClient, topics Topics) *Store {
	return &Store{rdb: rdb, topics: topics, now: time.Now, feeds: recordstore.InHash[Feed](rdb, defsKey("feeds"))}
}

// PutFeed adds f and returns it with created true; an existing feed at the
// URL is returned when its settings agree, else ErrConflict.
func (s *Store) PutFeed(ctx context.Context, f Feed) (Feed, bool, error) {
	f.URL = NormalizeURL(f.URL)
	if err := f.Validate(); err != nil {
		return Feed{}, false, err
	}
	f.ID, f.Added = FeedID(f.URL), s.stamp()
	f.PollEvery = cmp.Or(f.PollEvery, DefaultPollEvery.String())
	body, _ := json.Marshal(f)
	ok, err := s.rdb.HSetNX(ctx, defsKey("feeds"), f.ID, body).Result()
	if err != nil {
		return Feed{}, false, fmt.Errorf("feed: put: %w", err)
	}
	if ok {
		return f, true, nil
	}
	old, err := s.Feed(ctx, f.ID)
	if err != nil {
		return Feed{}, false, err
	}
	if !old.sameSettings(f) {
		return old, false, fmt.Errorf("%w: feed %s exists at that URL with other settings", ErrConflict, old.ID)
	}
	return old, false, nil
}

// Feed returns one feed, or ErrNotFound.
func (s *Store) Feed(ctx context.Context, id string) (Feed, error) {
	if !validID(id) {
		return Feed{}, ErrNotFound
	}
	f, err := s.feeds.Get(ctx, id)
	return f, found(err, id)
}

// Feeds returns every readable feed, by id.
func (s *Store) Feeds(ctx context.Context) ([]Feed, error) {
	all, err := s.feeds.All(ctx)
	if all == nil {
		return nil, fmt.Errorf("feed: list: %w", err)
	}
	return all, nil
}

// FeedPage returns up to limit (≥ 1) readable feeds by id after cursor
// ("" first), and the next cursor ("" on the last page).
func (s *Store) FeedPage(ctx context.Context, cursor string, limit int) ([]Feed, string, error) {
	page, err := s.feeds.List(ctx, cursor, limit)
	if page.Items == nil {
		return nil, "", fmt.Errorf("feed: list: %w", err)
	}
	return page.Items, page.NextCursor, nil
}

// DeleteFeed removes a feed and all its items; ErrConflict while it has
// subscribables, ErrNotFound when there is no such feed.
func (s *Store) DeleteFeed(ctx context.Context, id string) error {
	if _, err := s.Feed(ctx, id); err != nil {
		return err
	}
	subs, err := s.Subscribables(ctx, id)
	if err != nil {
		return err
	}
	if len(subs) > 0 {
		return fmt.Errorf("%w: feed %s still has %d subscribables", ErrConflict, id, len(subs))
	}
	if err := s.rdb.HDel(ctx, defsKey("feeds"), id).Err(); err != nil {
		return fmt.Errorf("feed: delete %s: %w", id, err)
	}
	for _, h := range []string{"validators", "failures", "halted", "websub"} {
		_ = s.rdb.HDel(ctx, defsKey(h), id).Err()
	}
	_ = s.rdb.Del(ctx, statsKey(id)).Err()
	prefix := s.topics.feedPrefix(id)
	_ = s.rdb.Del(ctx, prefix+"poll").Err()
	for {
		iids, err := s.rdb.ZRange(ctx, prefix+"items", 0, 499).Result()
		if err != nil {
			return fmt.Errorf("feed: delete items of %s: %w", id, err)
		}
		if len(iids) == 0 {
			break
		}
		keys := make([]string, len(iids))
		for i, iid := range iids {
			keys[i] = prefix + "item:" + iid
		}
		pipe := s.rdb.Pipeline()
		pipe.Del(ctx, keys...)
		pipe.ZRem(ctx, prefix+"items", iids) // go-redis spreads a []string
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("feed: delete items of %s: %w", id, err)
		}
	}
	return s.rdb.Del(ctx, prefix+"unassigned", prefix+"meta", prefix+"open", prefix+"completed", prefix+"guids", prefix+"content", prefix+"dropped",
		prefix+"prints", prefix+"arrivals").Err()
}

func subKey(feedID, name string) string { return feedID + "/" + name }

// PutSubscribable adds sb to an existing feed, or returns the same
// definition; a clashing name or one past MaxSubscribables is ErrConflict.
func (s *Store) PutSubscribable(ctx context.Context, sb Subscribable) (Subscribable, bool, error) {
	if err := sb.Validate(); err != nil {
		return Subscribable{}, false, err
	}
	if _, err := s.Feed(ctx, sb.FeedID); err != nil {
		return Subscribable{}, false, err
	}
	if sb.Tenant == tenancy.Open {
		sb.Tenant = "" // tenancy.Open's are stored without a tenant
	}
	sb.Added = s.stamp()
	body, _ := json.Marshal(sb)
	key := sb.Key()
	if exists, err := s.rdb.HExists(ctx, defsKey("subscribables:"+sb.FeedID), key).Result(); err != nil {
		return Subscribable{}, false, fmt.Errorf("feed: put subscribable: %w", err)
	} else if !exists {
		// A name deleted before (dropScript) takes items again.
		if err := s.rdb.HDel(ctx, s.topics.feedPrefix(sb.FeedID)+"dropped", key).Err(); err != nil {
			return Subscribable{}, false, fmt.Errorf("feed: put subscribable: %w", err)
		}
	}
	added, err := putSubscribable.Run(ctx, s.rdb, []string{defsKey("subscribables:" + sb.FeedID)}, key, body, MaxSubscribables,
		tenancy.Tag(sb.Tenant)).Int()
	if err != nil {
		return Subscribable{}, false, fmt.Errorf("feed: put subscribable: %w", err)
	}
	switch added {
	case 1:
		return sb, true, nil
	case -1:
		return Subscribable{}, false, fmt.Errorf("%w: feed %s has %d subscribables", ErrConflict, sb.FeedID, MaxSubscribables)
	}
	old, err := s.Subscribable(ctx, sb.FeedID, key)
	if err != nil {
		return Subscribable{}, false, err
	}
	if old.Manager != sb.Manager {
		return old, false, fmt.Errorf("%w: subscribable %s exists with another manager", ErrConflict, sb.Name)
	}
	return old, false, nil
}

// Subscribable returns the subscribable under key, or ErrNotFound.
func (s *Store) Subscribable(ctx context.Context, feedID, key string) (Subscribable, error) {
	if !validID(feedID) || !validKey(key) {
		return Subscribable{}, ErrNotFound
	}
	sb, err := recordstore.InHash[Subscribable](s.rdb, defsKey("subscribables:"+feedID)).Get(ctx, key)
	return sb, found(err, "subscribable "+key)
}

// found maps the error of a store's Get: ErrNotFound, or err wrapped.
func found(err error, what string) error {
	switch {
	case errors.Is(err, recordstore.ErrNotFound):
		return ErrNotFound
	case err != nil:
		return fmt.Errorf("feed: get %s: %w", what, err)
	}
	return nil
}

// Subscribables returns every tenant's subscribables of a feed, by key.
func (s *Store) Subscribables(ctx context.Context, feedID string) ([]Subscribable, error) {
	all, err := recordstore.InHash[Subscribable](s.rdb, defsKey("subscribables:"+feedID)).All(ctx)
	if all == nil {
		return nil, fmt.Errorf("feed: list subscribables: %w", err)
	}
	return all, nil // by key; unreadable ones left out
}

// DeleteSubscribable removes a subscribable and its subscriptions,
// releasing its open collections' items. Repeating it finishes the job.
func (s *Store) DeleteSubscribable(ctx context.Context, feedID, key string) error {
	if _, err := s.Subscribable(ctx, feedID, key); err != nil {
		return err
	}
	subs, err := s.Subscriptions(ctx, feedID, key)
	if err != nil {
		return err
	}
	for _, sub := range subs {
		if err := s.DeleteSubscription(ctx, sub.ID); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	prefix := s.topics.feedPrefix(feedID)
	part := s.topics.Polls.Partition(feedID)
	if err := dropScript.Run(ctx, s.rdb, []string{prefix + "meta"}, prefix, s.now().UnixMilli(),
		s.topics.History.Stream(part), "", feedID, key).Err(); err != nil {
		return fmt.Errorf("feed: close the collections of %s: %w", key, err)
	}
	return s.rdb.HDel(ctx, defsKey("subscribables:"+feedID), key).Err()
}

// Each tenant that added a feed holds it; a feed without tenants is
// tenancy.Open's.
func feedTenantsKey(id string) string     { return defsKey("tenants:" + id) }
func tenantFeedsKey(tenant string) string { return defsKey("tenant-feeds:" + tenancy.Of(tenant)) }

// AddTenant records that tenant holds feed id.
func (s *Store) AddTenant(ctx context.Context, id, tenant string) error {
	tenant = tenancy.Of(tenant)
	pipe := s.rdb.TxPipeline()
	pipe.SAdd(ctx, feedTenantsKey(id), tenant)
	pipe.SAdd(ctx, tenantFeedsKey(tenant), id)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("feed: tenant of %s: %w", id, err)
	}
	return nil
}

// Holds reports whether v sees feed id: v sees all, or v's tenant added
// it (tenancy.Open for a feed no tenant added).
func (s *Store) Holds(ctx context.Context, v tenancy.View, id string) (bool, error) {
	if v.All {
		return true, nil
	}
	pipe := s.rdb.Pipeline()
	n := pipe.SCard(ctx, feedTenantsKey(id))
	is := pipe.SIsMember(ctx, feedTenantsKey(id), v.Owner())
	if _, err := pipe.Exec(ctx); err != nil {
		return false, fmt.Errorf("feed: tenants of %s: %w", id, err)
	}
	if n.Val() == 0 {
		return v.Sees(tenancy.Open), nil
	}
	return is.Val(), nil
}

// DropTenant records that tenant no longer holds feed id, and reports
// whether other tenants still do (the feed then stays).
func (s *Store) DropTenant(ctx context.Context, id, tenant string) (othersHold bool, err error) {
	tenant = tenancy.Of(tenant)
	pipe := s.rdb.TxPipeline()
	pipe.SRem(ctx, feedTenantsKey(id), tenant)
	pipe.SRem(ctx, tenantFeedsKey(tenant), id)
	left := pipe.SCard(ctx, feedTenantsKey(id))
	if _, err := pipe.Exec(ctx); err != nil {
		return false, fmt.Errorf("feed: tenant of %s: %w", id, err)
	}
	return left.Val() > 0, nil
}

// TenantFeeds returns the feeds tenant holds that exist; an unreadable
// one is an error.
func (s *Store) TenantFeeds(ctx context.Context, tenant string) ([]Feed, error) {
	ids, err := s.rdb.SMembers(ctx, tenantFeedsKey(tenant)).Result()
	if err != nil {
		return nil, fmt.Errorf("feed: feeds of a tenant: %w", err)
	}
	return s.feeds.GetMany(ctx, ids)
}
