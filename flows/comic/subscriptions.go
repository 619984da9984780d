package comic

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/recordstore"
	"github.com/dropstream/dropstream/internal/script"
	"github.com/dropstream/dropstream/internal/settings"
	"github.com/dropstream/dropstream/internal/tenancy"
	"github.com/dropstream/dropstream/internal/tick"
)

// Errors of the subscription store, for errors.Is.
var (
	// ErrDuplicate: the (email, canonical body) pair is already subscribed.
	ErrDuplicate = errors.New("comic: duplicate subscription")
	// ErrNotFound: no such subscription (or comic).
	ErrNotFound = errors.New("comic: not found")
	// ErrTooMany: the tenant has MaxPerEmail subscriptions of the email.
	ErrTooMany = errors.New("comic: too many subscriptions for this email")
)

// Subscription asks that Email be told about every comic matching Body.
type Subscription struct {
	// ID derives from (tenant, email, canonical body).
	ID string `json:"id"`
	// Tenant is the caller's; only it and admin keys see the subscription.
	Tenant string `json:"tenant,omitempty" openapi:"readonly"`
	Email  string `json:"email"`
	// Body is the canonical partial comic.
	Body BodyJSON `json:"body"`
	// Pattern is the body's SearchPattern.
	Pattern string `json:"pattern"`
	// Shard is the index shard it is in (see StoreConfig.BloatThreshold).
	Shard int `json:"value_shard"`
	// NotifyURL is the subscriber's own POST /notify destination; "": the flow's.
	NotifyURL string `json:"notify_url,omitempty"`
	// Secret signs notifications to NotifyURL; shown only on creation.
	Secret    string    `json:"secret,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// StoreConfig configures a Store.
type StoreConfig struct {
	// MaxPerEmail bounds one tenant's subscriptions of one email. Default 1000.
	MaxPerEmail int `default:"1000" range:"1..100000"`
	// BloatThreshold is the index set size past which a new shard starts,
	// so no SMEMBERS blocks Redis long. Default 10000.
	BloatThreshold int `default:"10000" range:"1.."`
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// WithDefaults returns c with every zero field set to its default.
func (c StoreConfig) WithDefaults() StoreConfig {
	settings.Defaults(&c)
	c.Now = tick.Or(c.Now)
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c StoreConfig) Validate() error {
	return settings.Check("comic", &c)
}

// Store keeps subscriptions and their indexes in Redis, under the hash tag
// {comic-subs} (the keys are listed in flow.go). Create and Delete each
// update all of them in one script.
type Store struct {
	rdb  redis.UniversalClient
	cfg  StoreConfig
	subs *recordstore.Store[Subscription] // the hash subsKey
}

// NewStore returns a subscription store.
func NewStore(rdb redis.UniversalClient, cfg StoreConfig) (*Store, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Store{rdb: rdb, cfg: cfg, subs: recordstore.InHash[Subscription](rdb, subsKey)}, nil
}

// NormalizeEmail checks an email address and returns it lower-cased.
func NormalizeEmail(s string) (string, error) {
	e := strings.ToLower(strings.TrimSpace(s))
	at := strings.IndexByte(e, '@')
	if len(e) < 3 || len(e) > 254 || at < 1 || at != strings.LastIndexByte(e, '@') || at == len(e)-1 ||
		!strings.Contains(e[at+1:], ".") || strings.IndexFunc(e, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return "", &FieldError{Field: "email", Reason: "want an email address of at most 254 characters"}
	}
	return e, nil
}

// ValidateNotifyURL checks a destination URL: absolute http or https, at
// most 2048 bytes, no user info.
func ValidateNotifyURL(s string) error {
	u, err := url.Parse(s)
	if len(s) > 2048 || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return &FieldError{Field: "notify_url", Reason: "want an absolute http(s) URL of at most 2048 bytes without user info"}
	}
	return nil
}

// Create stores a subscription of email to body; errors wrap ErrInvalid
// (a *FieldError), ErrDuplicate or ErrTooMany.
func (s *Store) Create(ctx context.Context, email string, body json.RawMessage, notifyURL string) (Subscription, error) {
	return s.CreateFor(ctx, tenancy.Open, email, body, notifyURL)
}

// CreateFor is Create of a subscription of tenant.
func (s *Store) CreateFor(ctx context.Context, tenant, email string, body json.RawMessage, notifyURL string) (Subscription, error) {
	sub, b, err := s.newSubscription(NewSubscription{Email: email, Body: body, NotifyURL: notifyURL, Tenant: tenant})
	if err != nil {
		return Subscription{}, err
	}
	vh := valuesHash(b, splitPattern(sub.Pattern))
	k, err := s.rdb.HGet(ctx, bloatKey, bloatField(sub.Pattern, vh)).Int()
	if err != nil && !errors.Is(err, redis.Nil) {
		return Subscription{}, fmt.Errorf("comic: shard of %s: %w", sub.Pattern, err)
	}
	sub.Shard = k
	keys, args := s.scriptArgs(sub, b, vh)
	res, err := createScript.Run(ctx, s.rdb, keys, args...).Int64()
	switch {
	case err != nil:
		return Subscription{}, fmt.Errorf("comic: create subscription: %w", err)
	case res == 0:
		return Subscription{}, fmt.Errorf("%w: %s already subscribed to %s", ErrDuplicate, sub.Email, sub.Body)
	case res < 0:
		return Subscription{}, fmt.Errorf("%w (%d)", ErrTooMany, s.cfg.MaxPerEmail)
	}
	return sub, nil
}

// NewSubscription is one subscription to create (see CreateMany).
type NewSubscription struct {
	// Tenant owns it ("": tenancy.Open).
	Tenant    string
	Email     string
	Body      json.RawMessage
	NotifyURL string
}

// newSubscription validates a request; errors name fields "body.<field>".
func (s *Store) newSubscription(in NewSubscription) (Subscription, Body, error) {
	email, err := NormalizeEmail(in.Email)
	if err != nil {
		return Subscription{}, nil, err
	}
	b, err := ParseBody(in.Body)
	if err != nil {
		var fe *FieldError
		if errors.As(err, &fe) {
			fe.Field = strings.TrimSuffix("body."+fe.Field, ".")
		}
		return Subscription{}, nil, err
	}
	sub := Subscription{Email: email, Body: b.Canonical(), Pattern: b.Pattern(), CreatedAt: s.cfg.Now().UTC()}
	sub.ID = hashHex([]byte(email + "\x00" + string(sub.Body)))
	if t := tenancy.Of(in.Tenant); t != tenancy.Open {
		sub.Tenant = t
		sub.ID = hashHex([]byte(t + "\x00" + email + "\x00" + string(sub.Body)))
	}
	if in.NotifyURL != "" {
		if err := ValidateNotifyURL(in.NotifyURL); err != nil {
			return Subscription{}, nil, err
		}
		sub.NotifyURL = in.NotifyURL
		var raw [24]byte
		_, _ = rand.Read(raw[:])
		sub.Secret = hex.EncodeToString(raw[:])
	}
	return sub, b, nil
}

// Get returns one subscription, with its secret.
func (s *Store) Get(ctx context.Context, id string) (Subscription, error) {
	sub, err := s.subs.Get(ctx, id)
	if errors.Is(err, recordstore.ErrNotFound) {
		return Subscription{}, fmt.Errorf("%w: subscription %s", ErrNotFound, clipName(id))
	}
	if err != nil {
		return Subscription{}, fmt.Errorf("comic: get subscription: %w", err)
	}
	return sub, nil
}

// ByEmailIn returns the subscriptions of an email that v sees, oldest
// first, without their secrets.
func (s *Store) ByEmailIn(ctx context.Context, v tenancy.View, email string) ([]Subscription, error) {
	email, err := NormalizeEmail(email)
	if err != nil {
		return nil, err
	}
	key := emailKey(email)
	if !v.All {
		key = tenantEmailKey(v.Tenant, email)
	}
	ids, err := s.rdb.SMembers(ctx, key).Result()
	if err != nil {
		return nil, fmt.Errorf("comic: subscriptions of %s: %w", email, err)
	}
	subs, err := s.subs.GetMany(ctx, ids) // those that still exist, in ids' order
	if err != nil {
		return nil, fmt.Errorf("comic: load subscriptions: %w", err)
	}
	out := make([]Subscription, 0, len(subs))
	for _, sub := range subs {
		if !v.Sees(sub.Tenant) {
			continue
		}
		sub.Secret = ""
		out = append(out, sub)
	}
	slices.SortFunc(out, func(a, b Subscription) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	return out, nil
}

// DeleteIn removes a subscription v sees and its index entries; the error
// wraps ErrNotFound when there is none (or it is another tenant's).
func (s *Store) DeleteIn(ctx context.Context, v tenancy.View, id string) error {
	sub, err := s.Get(ctx, id)
	if err == nil && !v.Sees(sub.Tenant) {
		err = fmt.Errorf("%w: subscription %s", ErrNotFound, clipName(id))
	}
	if err != nil {
		return err
	}
	b, err := ParseBody(sub.Body)
	if err != nil {
		return fmt.Errorf("comic: stored subscription %s: %w", id, err)
	}
	keys, args := s.scriptArgs(sub, b, valuesHash(b, splitPattern(sub.Pattern)))
	res, err := deleteScript.Run(ctx, s.rdb, keys, args...).Int64()
	if err != nil {
		return fmt.Errorf("comic: delete subscription: %w", err)
	}
	if res == 0 {
		return fmt.Errorf("%w: subscription %s", ErrNotFound, id)
	}
	return nil
}

// createScript stores a subscription with all its index entries; a full
// shard starts the next one. KEYS subs, email set, patterns, index shard,
// field totals, version, bloat, tenant email set, then a field-stats zset
// per field; ARGV id, record, pattern, bloat field, max per email, bloat
// threshold, shard, index member, its score ("": a set index), then the
// index values and field names. Returns 1, 0 duplicate, -1 too many.
var createScript = script.New(`
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 0 end
if redis.call('SCARD', KEYS[8]) >= tonumber(ARGV[5]) then return -1 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('SADD', KEYS[8], ARGV[1])
if tonumber(redis.call('ZINCRBY', KEYS[3], 1, ARGV[3])) == 1 then redis.call('INCR', KEYS[6]) end
local card
if ARGV[9] == '' then
  redis.call('SADD', KEYS[4], ARGV[8])
  card = redis.call('SCARD', KEYS[4])
else
  redis.call('ZADD', KEYS[4], ARGV[9], ARGV[8])
  card = redis.call('ZCARD', KEYS[4])
end
local k = tonumber(ARGV[7])
if card >= tonumber(ARGV[6]) and tonumber(redis.call('HGET', KEYS[7], ARGV[4]) or '0') == k then
  redis.call('HSET', KEYS[7], ARGV[4], k + 1)
  redis.call('INCR', KEYS[6])
end
local nf = #KEYS - 8
for i = 1, nf do
  redis.call('ZINCRBY', KEYS[8 + i], 1, ARGV[9 + i])
  redis.call('HINCRBY', KEYS[5], ARGV[9 + nf + i], 1)
end
return 1`)

// deleteScript removes a subscription; it takes createScript's keys and
// arguments. A value set keeps its shards when they empty.
var deleteScript = script.New(`
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('SREM', KEYS[2], ARGV[1])
redis.call('SREM', KEYS[8], ARGV[1])
if tonumber(redis.call('ZINCRBY', KEYS[3], -1, ARGV[3])) <= 0 then
  redis.call('ZREM', KEYS[3], ARGV[3])
  redis.call('INCR', KEYS[6])
end
if ARGV[9] == '' then redis.call('SREM', KEYS[4], ARGV[8]) else redis.call('ZREM', KEYS[4], ARGV[8]) end
local nf = #KEYS - 8
for i = 1, nf do
  if tonumber(redis.call('ZINCRBY', KEYS[8 + i], -1, ARGV[9 + i])) <= 0 then redis.call('ZREM', KEYS[8 + i], ARGV[9 + i]) end
  if redis.call('HINCRBY', KEYS[5], ARGV[9 + nf + i], -1) <= 0 then redis.call('HDEL', KEYS[5], ARGV[9 + nf + i]) end
end
return 1`)

// scriptArgs returns the keys and arguments of createScript and
// deleteScript for sub, whose values hash to vh.
func (s *Store) scriptArgs(sub Subscription, b Body, vh string) ([]string, []any) {
	rec, _ := json.Marshal(sub)
	names := splitPattern(sub.Pattern)
	keys := []string{subsKey, emailKey(sub.Email), patternsKey, indexKey(sub.Pattern, vh, sub.Shard), fieldTotalKey,
		patVersionKey, bloatKey, tenantEmailKey(sub.Tenant, sub.Email)}
	member, score := indexEntry(sub.ID, b, names)
	args := []any{sub.ID, rec, sub.Pattern, bloatField(sub.Pattern, vh), s.cfg.MaxPerEmail, s.cfg.BloatThreshold, sub.Shard, member, score}
	fieldNames := make([]string, len(names))
	for i, n := range names {
		fieldNames[i], _ = splitToken(n)
		keys = append(keys, fieldStatsKey(fieldNames[i]))
		args = append(args, indexValue(b[fieldNames[i]]))
	}
	for _, n := range fieldNames {
		args = append(args, n)
	}
	return keys, args
}

// CreateMany creates subscriptions in pipelined batches and returns how
// many were created, skipping duplicates and those over MaxPerEmail; the
// first invalid one stops it.
func (s *Store) CreateMany(ctx context.Context, subs []NewSubscription) (int, error) {
	created := 0
	const chunk = 100 // scripts per pipeline: bounds one round trip
	for start := 0; start < len(subs); start += chunk {
		batch := subs[start:min(start+chunk, len(subs))]
		parsed := make([]Subscription, len(batch))
		bodies := make([]Body, len(batch))
		hashes := make([]string, len(batch))
		fields := make([]string, len(batch))
		for i, in := range batch {
			sub, b, err := s.newSubscription(in)
			if err != nil {
				return created, err
			}
			parsed[i], bodies[i] = sub, b
			hashes[i] = valuesHash(b, splitPattern(sub.Pattern))
			fields[i] = bloatField(sub.Pattern, hashes[i])
		}
		shards, err := s.rdb.HMGet(ctx, bloatKey, fields...).Result()
		if err != nil {
			return created, fmt.Errorf("comic: shards: %w", err)
		}
		calls := make([]script.Call, len(batch))
		for i := range batch {
			if v, ok := shards[i].(string); ok {
				parsed[i].Shard, _ = strconv.Atoi(v)
			}
			keys, args := s.scriptArgs(parsed[i], bodies[i], hashes[i])
			calls[i] = script.Call{Keys: keys, Args: args}
		}
		cmds, _ := createScript.RunAll(ctx, s.rdb, calls) // errors are read per command
		for _, c := range cmds {
			n, err := c.Int64()
			if err != nil {
				return created, fmt.Errorf("comic: create subscription: %w", err)
			}
			if n == 1 {
				created++
			}
		}
	}
	return created, nil
}
