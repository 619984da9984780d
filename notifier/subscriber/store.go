package subscriber

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/internal/quota"
	"github.com/dropstream/dropstream/internal/recordstore"
	"github.com/dropstream/dropstream/internal/rediskey"
	"github.com/dropstream/dropstream/internal/settings"
	"github.com/dropstream/dropstream/internal/tenancy"
	"github.com/dropstream/dropstream/internal/tick"
)

// Errors of the store, for errors.Is.
var (
	// ErrNotFound: no subscriber (or destination) has the id.
	ErrNotFound = errors.New("subscriber: not found")
	// ErrDuplicate: the tenant already subscribed a destination's core.
	ErrDuplicate = errors.New("subscriber: destination already subscribed")
	// ErrTooMany: the store holds StoreConfig.MaxSubscribers.
	ErrTooMany = errors.New("subscriber: too many subscribers")
	// ErrTokenNotFound: the token is unknown, used or expired.
	ErrTokenNotFound = errors.New("subscriber: token not found or expired")
)

// Token purposes.
const (
	PurposeConfirm     = "confirm"
	PurposeUnsubscribe = "unsub"
)

// Defaults of StoreConfig.
const (
	DefaultConfirmTTL = 48 * time.Hour
	DefaultPageSize   = 100
	MaxPageSize       = 1000
)

const (
	tag         = "{notifier}"
	subPrefix   = rediskey.Prefix + tag + ":sub:"
	subsKey     = rediskey.Prefix + tag + ":subs"
	corePrefix  = rediskey.Prefix + tag + ":core:"
	tokenPrefix = rediskey.Prefix + tag + ":token:"
	pendingKey  = rediskey.Prefix + tag + ":pending"
)

func subKey(id string) string           { return subPrefix + id }
func tokenKey(tok string) string        { return tokenPrefix + hashToken(tok) }
func pendingMember(id, d string) string { return id + "|" + d }

// coreKey names a destination core taken within tenant.
func coreKey(tenant, core string) string {
	if t := tenancy.Of(tenant); t != tenancy.Open {
		return corePrefix + CoreHash(t+"|"+core)
	}
	return corePrefix + CoreHash(core)
}

func hashToken(tok string) string {
	sum := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(sum[:])
}

// StoreConfig configures a Store. Zero fields take their defaults.
type StoreConfig struct {
	// ConfirmTTL is how long a destination may stay unconfirmed (1m..30d).
	// Default 48h.
	ConfirmTTL time.Duration `range:"1m..720h"`
	// MaxSubscribers bounds the store. Default 1,000,000.
	MaxSubscribers int `default:"1000000" range:"1..100000000"`
	// Quota caps subscribers per caller; removal frees a slot. Nil: no cap.
	Quota *quota.Quota
	// Logger reports undecodable records. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// WithDefaults returns c with every zero field set to its default.
func (c StoreConfig) WithDefaults() StoreConfig {
	settings.Defaults(&c)
	c.ConfirmTTL = cmp.Or(c.ConfirmTTL, DefaultConfirmTTL)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.Now = tick.Or(c.Now)
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c StoreConfig) Validate() error {
	return settings.Check("subscriber", &c)
}

// Store keeps subscribers (see the package doc); safe for concurrent use.
type Store struct {
	rdb     redis.UniversalClient
	cfg     StoreConfig
	records *recordstore.Store[Subscriber] // the subscribers by id, as Create writes them
	decoded *lru.Cache[string, decoded]    // of ResolveMany, by id
}

// NewStore returns a store over rdb.
func NewStore(rdb redis.UniversalClient, cfg StoreConfig) (*Store, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	records, err := recordstore.New(rdb, recordstore.Config[Subscriber]{
		Layout: recordstore.Layout{Prefix: subPrefix, Index: subsKey},
		Decode: decodeSubscriber,
		Tenant: func(s Subscriber) string { return s.Tenant },
	})
	if err != nil {
		return nil, err
	}
	cache, _ := lru.New[string, decoded](maxDecoded) // fails only for a size below 1
	return &Store{rdb: rdb, cfg: cfg, records: records, decoded: cache}, nil
}

// decodeSubscriber reads a stored subscriber, which must carry its id.
func decodeSubscriber(id string, raw []byte) (Subscriber, error) {
	var s Subscriber
	if err := json.Unmarshal(raw, &s); err != nil {
		return Subscriber{}, fmt.Errorf("%w: subscriber %s: %w", recordstore.ErrCorrupt, id, err)
	}
	if s.ID != id {
		return Subscriber{}, fmt.Errorf("%w: subscriber %s holds the record of %q", recordstore.ErrCorrupt, id, clip.Marked(s.ID, maxQuoted))
	}
	return s, nil
}

// notFound maps the record store's ErrNotFound to the subscriber's.
func notFound(id string, err error) error {
	if errors.Is(err, recordstore.ErrNotFound) {
		return fmt.Errorf("%w: subscriber %s", ErrNotFound, id)
	}
	return err
}

// Created is the subscriber with its secrets and opt-in tokens by
// destination id.
type Created struct {
	Subscriber    Subscriber
	ConfirmTokens map[string]string
}

// createScript stores a subscriber with its cores, tokens and pending
// entries unless a core is taken or the store is full. KEYS: sub, subs,
// pending, n cores, n tokens, owners, tenant index. ARGV: id, json, max, n,
// confirm ttl ms, expiry ms, n core values, n token values, n pending, tenant.
var createScript = redis.NewScript(`
local n = tonumber(ARGV[4])
for i = 1, n do
  if redis.call('EXISTS', KEYS[3 + i]) == 1 then return -i end
end
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[3]) then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], 0, ARGV[1])
for i = 1, n do
  redis.call('SET', KEYS[3 + i], ARGV[6 + i])
  redis.call('SET', KEYS[3 + n + i], ARGV[6 + n + i], 'PX', ARGV[5])
  redis.call('ZADD', KEYS[3], ARGV[6], ARGV[6 + 2 * n + i])
end
redis.call('HSET', KEYS[#KEYS - 1], ARGV[1], ARGV[#ARGV])
redis.call('ZADD', KEYS[#KEYS], 0, ARGV[1])
return 1`)

// Create validates s, fills in store-set fields and stores it with an
// opt-in token per destination. Errors wrap ErrInvalid, ErrDuplicate or
// ErrTooMany.
func (st *Store) Create(ctx context.Context, s Subscriber) (Created, error) {
	if err := s.Validate(); err != nil {
		return Created{}, err
	}
	now := st.cfg.Now().UTC()
	s.ID, s.CreatedAt = fmt.Sprintf("s_%012x%s", now.UnixMilli(), randomHex(8)), now
	s.Destinations = append([]Destination(nil), s.Destinations...)
	expires := now.Add(st.cfg.ConfirmTTL)
	n := len(s.Destinations)
	keys := []string{subKey(s.ID), subsKey, pendingKey}
	var cores, tokKeys, coreVals, tokVals, members []string
	out := Created{ConfirmTokens: map[string]string{}}
	for i := range s.Destinations {
		d := &s.Destinations[i]
		d.ID = "d" + randomHex(8)
		if k, _ := LookupKind(d.Kind); k.Secret && d.Secret == "" {
			d.Secret = "whsec_" + randomHex(32)
		}
		d.Status, d.CreatedAt, d.ExpiresAt, d.ConfirmedAt, d.UnsubscribeToken = StatusPending, now, expires, time.Time{}, ""
		core, _ := d.Core()
		tok := randomHex(32)
		out.ConfirmTokens[d.ID] = tok
		cores, coreVals = append(cores, coreKey(s.Tenant, core)), append(coreVals, s.ID+"|"+d.ID)
		tokKeys, tokVals = append(tokKeys, tokenKey(tok)), append(tokVals, PurposeConfirm+"|"+s.ID+"|"+d.ID)
		members = append(members, pendingMember(s.ID, d.ID))
	}
	body, err := json.Marshal(s)
	if err != nil {
		return Created{}, fmt.Errorf("subscriber: encode: %w", err)
	}
	tenant := tenancy.Of(s.Tenant)
	keys = append(append(append(keys, cores...), tokKeys...), st.records.OwnersKey(), st.records.TenantIndex(tenant))
	args := []any{s.ID, body, st.cfg.MaxSubscribers, n, st.cfg.ConfirmTTL.Milliseconds(), expires.UnixMilli()}
	for _, v := range slices.Concat(coreVals, tokVals, members) {
		args = append(args, v)
	}
	args = append(args, tenant)
	res, err := createScript.Run(ctx, st.rdb, keys, args...).Int()
	switch {
	case err != nil:
		return Created{}, fmt.Errorf("subscriber: create: %w", err)
	case res == 0:
		return Created{}, fmt.Errorf("%w: the store holds %d", ErrTooMany, st.cfg.MaxSubscribers)
	case res < 0:
		d := s.Destinations[-res-1]
		return Created{}, fmt.Errorf("%w: %s %s", ErrDuplicate, d.Kind, clip.Marked(d.Address, maxQuoted))
	}
	out.Subscriber = s
	return out, nil
}

// Get returns the subscriber without secrets; errors wrap ErrNotFound.
func (st *Store) Get(ctx context.Context, id string) (Subscriber, error) {
	return st.GetIn(ctx, tenancy.View{All: true}, id)
}

// GetIn is Get of a subscriber v sees: another tenant's is ErrNotFound.
func (st *Store) GetIn(ctx context.Context, v tenancy.View, id string) (Subscriber, error) {
	s, err := st.Resolve(ctx, id)
	if err == nil && !v.Sees(s.Tenant) {
		return Subscriber{}, fmt.Errorf("%w: subscriber %s", ErrNotFound, id)
	}
	return s.public(), err
}

// Resolve returns the subscriber with secrets; errors wrap ErrNotFound.
func (st *Store) Resolve(ctx context.Context, id string) (Subscriber, error) {
	if !ValidSubscriberID(id) {
		return Subscriber{}, fmt.Errorf("%w: subscriber %q", ErrNotFound, clip.Marked(id, maxQuoted))
	}
	s, err := st.records.Get(ctx, id)
	return s, notFound(id, err)
}

// List returns up to limit subscribers without secrets after cursor, in id
// order, and the next cursor ("" at the end); a bad cursor wraps ErrInvalid.
func (st *Store) List(ctx context.Context, cursor string, limit int) ([]Subscriber, string, error) {
	return st.ListIn(ctx, tenancy.View{All: true}, cursor, limit)
}

// ListIn is List of the subscribers v sees, paged over its tenant's own.
func (st *Store) ListIn(ctx context.Context, v tenancy.View, cursor string, limit int) ([]Subscriber, string, error) {
	if cursor != "" && !ValidSubscriberID(cursor) {
		return nil, "", fmt.Errorf("%w: cursor %q", ErrInvalid, clip.Marked(cursor, maxQuoted))
	}
	if limit < 1 {
		limit = DefaultPageSize
	}
	page, err := st.records.ListIn(ctx, v, cursor, min(limit, MaxPageSize))
	if err != nil && !errors.Is(err, recordstore.ErrCorrupt) {
		return nil, "", fmt.Errorf("subscriber: list: %w", err)
	}
	if err != nil {
		st.cfg.Logger.WarnContext(ctx, "subscriber: skipping undecodable records", "error", err)
	}
	out := make([]Subscriber, len(page.Items))
	for i, s := range page.Items {
		out[i] = s.public()
	}
	return out, page.NextCursor, nil
}

// Delete removes a subscriber, its cores and tokens; errors wrap ErrNotFound.
func (st *Store) Delete(ctx context.Context, id string) error {
	return st.DeleteIn(ctx, tenancy.View{All: true}, id)
}

// DeleteIn is Delete within v; another tenant's is ErrNotFound.
func (st *Store) DeleteIn(ctx context.Context, v tenancy.View, id string) error {
	for range maxTxTries {
		err := st.rdb.Watch(ctx, func(tx *redis.Tx) error {
			s, err := st.Resolve(ctx, id)
			if err == nil && !v.Sees(s.Tenant) {
				err = fmt.Errorf("%w: subscriber %s", ErrNotFound, id)
			}
			if err != nil {
				return err
			}
			_, err = tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
				for _, d := range append([]Destination(nil), s.Destinations...) {
					st.removeDestination(ctx, pipe, &s, d)
				}
				return nil
			})
			return err
		}, subKey(id))
		if errors.Is(err, redis.TxFailedErr) {
			continue
		}
		if err == nil {
			st.release(ctx, id)
		}
		return err
	}
	return fmt.Errorf("subscriber: delete %s: too much contention", id)
}

// SetPreferencesIn replaces the preferences and time zone of a subscriber
// v sees; errors wrap ErrInvalid or ErrNotFound.
func (st *Store) SetPreferencesIn(ctx context.Context, v tenancy.View, id, timeZone string, p Preferences) (Subscriber, error) {
	if err := p.Validate(); err != nil {
		return Subscriber{}, err
	}
	if _, err := LoadLocation(timeZone); err != nil {
		return Subscriber{}, err
	}
	if !ValidSubscriberID(id) {
		return Subscriber{}, fmt.Errorf("%w: subscriber %q", ErrNotFound, clip.Marked(id, maxQuoted))
	}
	s, err := st.records.UpdateIn(ctx, v, id, func(s *Subscriber) error {
		s.Preferences, s.TimeZone = p, timeZone
		return nil
	})
	if err != nil {
		return Subscriber{}, fmt.Errorf("subscriber: preferences of %s: %w", id, notFound(id, err))
	}
	return s.public(), nil
}

// ExpireUnconfirmed removes up to limit destinations whose opt-in expired
// (and emptied subscribers) and returns how many.
func (st *Store) ExpireUnconfirmed(ctx context.Context, now time.Time, limit int) (int, error) {
	members, err := st.rdb.ZRangeByScore(ctx, pendingKey, &redis.ZRangeBy{Min: "-inf",
		Max: strconv.FormatInt(now.UnixMilli(), 10), Count: int64(max(limit, 1))}).Result()
	if err != nil {
		return 0, fmt.Errorf("subscriber: expire: %w", err)
	}
	removed := 0
	for _, m := range members {
		id, did, _ := strings.Cut(m, "|")
		err := st.rdb.Watch(ctx, func(tx *redis.Tx) error {
			s, err := st.Resolve(ctx, id)
			if errors.Is(err, ErrNotFound) {
				return tx.ZRem(ctx, pendingKey, m).Err()
			}
			if err != nil {
				return err
			}
			d, ok := s.Destination(did)
			if !ok || d.Status != StatusPending || d.ExpiresAt.After(now) {
				return tx.ZRem(ctx, pendingKey, m).Err()
			}
			_, err = tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
				st.removeDestination(ctx, pipe, &s, d)
				return nil
			})
			if err == nil {
				removed++
				if len(s.Destinations) == 0 {
					st.release(ctx, id)
				}
			}
			return err
		}, subKey(id))
		if err != nil && !errors.Is(err, redis.TxFailedErr) {
			return removed, fmt.Errorf("subscriber: expire %s: %w", m, err)
		}
	}
	return removed, nil
}

// release frees a removed subscriber's quota slot, logging a failure.
func (st *Store) release(ctx context.Context, id string) {
	if err := st.cfg.Quota.Release(ctx, id); err != nil {
		st.cfg.Logger.WarnContext(ctx, "subscriber: quota slot not freed", "subscriber_id", id, "error", err)
	}
}
