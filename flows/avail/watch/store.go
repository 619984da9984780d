package watch

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/internal/quota"
	"github.com/dropstream/dropstream/internal/recordstore"
	"github.com/dropstream/dropstream/internal/rediskey"
	"github.com/dropstream/dropstream/internal/settings"
	"github.com/dropstream/dropstream/internal/tenancy"
	"github.com/dropstream/dropstream/stream"
)

// watcherTag is the hash tag of every watcher key, so one script creates
// and indexes a watcher atomically.
const watcherTag = "{notifier}"

// Keys of the watcher store; see the package documentation.
const (
	watcherPrefix = rediskey.Prefix + watcherTag + ":watcher:"
	watchersKey   = rediskey.Prefix + watcherTag + ":watchers"
	matchPrefix   = rediskey.Prefix + watcherTag + ":match:"
)

func watcherKey(id string) string { return watcherPrefix + id }

// indexKey is the one match-index set a watcher is filed under: its most
// specific constraint (slot, else venue, else provider).
func indexKey(w Watcher) string {
	switch {
	case w.Slot != "":
		return matchPrefix + "slot:" + w.Slot
	case w.Venue != "":
		return matchPrefix + "venue:" + w.Provider + "|" + w.Venue
	default:
		return matchPrefix + "provider:" + w.Provider
	}
}

// indexKeys are the sets a watcher is filed under: its match set and, for
// a slot watcher, its venue's slot-watcher set.
func indexKeys(w Watcher) []string {
	keys := []string{indexKey(w)}
	if w.Slot != "" {
		if e, err := avail.ParseKey(w.Slot); err == nil {
			keys = append(keys, slotVenueKey(e.Provider, e.Venue))
		}
	}
	return keys
}

// slotVenueKey is the set of slot watchers of a venue.
func slotVenueKey(provider, venue string) string {
	return matchPrefix + "slotvenue:" + provider + "|" + venue
}

// sourceKeys are the index sets that may hold watchers of a source's
// scopes: its provider's, and per venue the venue's and its slot watchers'.
func sourceKeys(provider string, venues []string) []string {
	keys := []string{matchPrefix + "provider:" + provider}
	for _, v := range venues {
		keys = append(keys, matchPrefix+"venue:"+provider+"|"+v, slotVenueKey(provider, v))
	}
	return keys
}

// matchKeys are the index sets that may hold watchers of an entity.
func matchKeys(e avail.Entity) []string {
	keys := []string{matchPrefix + "slot:" + e.Key}
	if e.Provider != "" {
		keys = append(keys, matchPrefix+"provider:"+e.Provider)
		if e.Venue != "" {
			keys = append(keys, matchPrefix+"venue:"+e.Provider+"|"+e.Venue)
		}
	}
	return keys
}

// eventsKey is the sorted set of an entity's recent raw opens and closes,
// in the partition of the transition stream that carries them.
func eventsKey(topic stream.Topic, partition int, entityKey string) string {
	return rediskey.Key(topic.HashTag(partition), "notifier", "events", entityKey)
}

// Defaults and limits of the watcher store.
const (
	DefaultMaxWatchers = 100_000
	DefaultPageSize    = 100
	MaxPageSize        = 1000
)

// Errors of the watcher store, for errors.Is.
var (
	// ErrNotFound: no watcher has the id.
	ErrNotFound = errors.New("notifier: watcher not found")
	// ErrTooManyWatchers: the store holds StoreConfig.MaxWatchers watchers.
	ErrTooManyWatchers = errors.New("notifier: too many watchers")
	// ErrQuotaExceeded: the owner holds MaxPerOwner; wraps quota.ErrExceeded.
	ErrQuotaExceeded = fmt.Errorf("notifier: watchers per owner: %w", quota.ErrExceeded)
)

// StoreConfig configures a Store. Zero fields take their defaults.
type StoreConfig struct {
	// MaxWatchers bounds the watchers (ErrTooManyWatchers). Default 100,000.
	MaxWatchers int `range:"1..100000000"`
	// MaxPerOwner bounds one Owner's watchers; 0: no bound.
	MaxPerOwner int `range:"0..MaxWatchers"`
	// Logger reports skipped undecodable watchers. Default slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns c with every zero field set to its default.
func (c StoreConfig) WithDefaults() StoreConfig {
	c.MaxWatchers = cmp.Or(c.MaxWatchers, DefaultMaxWatchers)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c StoreConfig) Validate() error {
	return settings.Check("notifier", &c)
}

// Store keeps watchers in Redis with a match index (package doc). It is
// safe for concurrent use.
type Store struct {
	rdb     redis.UniversalClient
	cfg     StoreConfig
	records *recordstore.Store[Watcher]
	owners  *quota.Quota // nil: no bound per owner
}

// NewStore returns a store over rdb.
func NewStore(rdb redis.UniversalClient, cfg StoreConfig) (*Store, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	records, err := recordstore.New(rdb, recordstore.Config[Watcher]{Layout: recordstore.Layout{Prefix: watcherPrefix, Index: watchersKey},
		Max: cfg.MaxWatchers, Decode: decodeWatcher, Tenant: func(w Watcher) string { return w.Owner }})
	if err != nil {
		return nil, err
	}
	s := &Store{rdb: rdb, cfg: cfg, records: records}
	if s.owners, err = quota.Optional(rdb, "watchers", cfg.MaxPerOwner); err != nil {
		return nil, err
	}
	return s, nil
}

// decodeWatcher reads a stored watcher, which must carry its own id.
func decodeWatcher(id string, raw []byte) (Watcher, error) {
	var w Watcher
	if err := json.Unmarshal(raw, &w); err != nil {
		return Watcher{}, fmt.Errorf("notifier: decode watcher %s: %w", clip.Marked(id, maxQuoted), err)
	}
	if w.ID != id {
		return Watcher{}, fmt.Errorf("notifier: watcher stored under %s has id %q", clip.Marked(id, maxQuoted), clip.Marked(w.ID, maxQuoted))
	}
	return w, nil
}

// createScript stores, lists and indexes a watcher unless the store is
// full. KEYS: watcher, watchers, owners, tenant's watchers, index sets;
// ARGV: id, JSON, max, tenant.
var createScript = redis.NewScript(`
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[3]) then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], 0, ARGV[1])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[4])
redis.call('ZADD', KEYS[4], 0, ARGV[1])
for i = 5, #KEYS do redis.call('SADD', KEYS[i], ARGV[1]) end
return 1`)

// Create validates and stores w with its index atomically and returns it
// with its Secret, shown only here. Errors wrap ErrInvalidWatcher,
// ErrTooManyWatchers or ErrQuotaExceeded.
func (s *Store) Create(ctx context.Context, w Watcher) (Watcher, error) {
	if err := w.Validate(); err != nil {
		return Watcher{}, err
	}
	now := time.Now().UTC()
	id := newWatcherID(now)
	w.ID, w.CreatedAt = id, now
	if w.Secret == "" {
		w.Secret = newSecret()
	}
	w.PartySizes = append([]int(nil), w.PartySizes...)
	body, err := json.Marshal(w)
	if err != nil {
		return Watcher{}, fmt.Errorf("notifier: encode watcher: %w", err)
	}
	if s.owners != nil && w.Owner != "" {
		if err := s.owners.Claim(ctx, w.Owner, id); errors.Is(err, quota.ErrExceeded) {
			return Watcher{}, fmt.Errorf("%w: %w", ErrQuotaExceeded, err)
		} else if err != nil {
			return Watcher{}, fmt.Errorf("notifier: create watcher: %w", err)
		}
	}
	tenant := tenancy.Of(w.Owner)
	keys := append([]string{watcherKey(id), watchersKey, s.records.OwnersKey(), s.records.TenantIndex(tenant)}, indexKeys(w)...)
	n, err := createScript.Run(ctx, s.rdb, keys, id, body, s.cfg.MaxWatchers, tenant).Int()
	if err == nil && n == 0 {
		err = fmt.Errorf("%w: the store holds %d", ErrTooManyWatchers, s.cfg.MaxWatchers)
	}
	if err != nil {
		if s.owners != nil && w.Owner != "" {
			err = errors.Join(err, s.owners.Release(ctx, id))
		}
		if !errors.Is(err, ErrTooManyWatchers) {
			err = fmt.Errorf("notifier: create watcher: %w", err)
		}
		return Watcher{}, err
	}
	return w, nil
}

// Get returns a watcher without its Secret; errors wrap ErrInvalidWatcher
// or ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (Watcher, error) {
	return s.GetIn(ctx, tenancy.View{All: true}, id)
}

// GetIn is Get of a watcher v sees: another tenant's is ErrNotFound.
func (s *Store) GetIn(ctx context.Context, v tenancy.View, id string) (Watcher, error) {
	w, err := s.get(ctx, v, id)
	w.Secret = ""
	return w, err
}

func (s *Store) get(ctx context.Context, v tenancy.View, id string) (Watcher, error) {
	if !validID(id) {
		return Watcher{}, fmt.Errorf("%w: id %q", ErrInvalidWatcher, clip.Marked(id, maxQuoted))
	}
	w, err := s.records.GetIn(ctx, v, id)
	if errors.Is(err, recordstore.ErrNotFound) {
		return Watcher{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return Watcher{}, fmt.Errorf("notifier: get watcher %s: %w", id, err)
	}
	return w, nil
}

// List returns up to limit watchers (no Secrets) after cursor in id order
// and the next cursor ("" at the end). A bad cursor wraps ErrInvalidWatcher.
func (s *Store) List(ctx context.Context, cursor string, limit int) ([]Watcher, string, error) {
	return s.ListIn(ctx, tenancy.View{All: true}, cursor, limit)
}

// ListIn is List of the watchers v sees, paged over its tenant's own.
func (s *Store) ListIn(ctx context.Context, v tenancy.View, cursor string, limit int) ([]Watcher, string, error) {
	if cursor != "" && !validID(cursor) {
		return nil, "", fmt.Errorf("%w: cursor %q", ErrInvalidWatcher, clip.Marked(cursor, maxQuoted))
	}
	if limit < 1 {
		limit = DefaultPageSize
	}
	limit = min(limit, MaxPageSize)
	page, err := s.records.ListIn(ctx, v, cursor, limit)
	if err != nil && page.Items == nil {
		return nil, "", fmt.Errorf("notifier: list watchers: %w", err)
	}
	if err != nil {
		s.cfg.Logger.WarnContext(ctx, "notifier: skipping undecodable watchers", "error", err)
	}
	for i := range page.Items {
		page.Items[i].Secret = ""
	}
	return page.Items, page.NextCursor, nil
}

// DeleteIn removes a watcher v sees and its index entry atomically. Errors
// wrap ErrInvalidWatcher or ErrNotFound (also for another tenant's watcher).
func (s *Store) DeleteIn(ctx context.Context, v tenancy.View, id string) error {
	w, err := s.get(ctx, v, id)
	if err != nil {
		return err
	}
	var del *redis.IntCmd
	_, err = s.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		del = pipe.Del(ctx, watcherKey(id))
		pipe.ZRem(ctx, watchersKey, id)
		pipe.HDel(ctx, s.records.OwnersKey(), id)
		pipe.ZRem(ctx, s.records.TenantIndex(w.Owner), id)
		for _, k := range indexKeys(w) {
			pipe.SRem(ctx, k, id)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("notifier: delete watcher %s: %w", id, err)
	}
	if del.Val() == 0 {
		return fmt.Errorf("%w: %s", ErrNotFound, id) // deleted concurrently
	}
	return s.owners.Release(ctx, id) // nil owners: no bound per owner
}

// load reads the watchers of ids in order, with secrets, skipping gone or
// undecodable ones.
func (s *Store) load(ctx context.Context, ids []string) ([]Watcher, error) {
	out, err := s.records.GetMany(ctx, ids)
	if out == nil {
		return nil, fmt.Errorf("notifier: load watchers: %w", err)
	}
	if err != nil {
		s.cfg.Logger.WarnContext(ctx, "notifier: skipping undecodable watchers", "error", err)
	}
	return out, nil
}
