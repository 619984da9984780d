package comic

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/redis/go-redis/v9"
)

// Errors of the subscription store, for errors.Is.
var (
	// ErrDuplicate: the (email, canonical body) pair is already subscribed.
	ErrDuplicate = errors.New("comic: duplicate subscription")
	// ErrNotFound: no such subscription (or comic).
	ErrNotFound = errors.New("comic: not found")
	// ErrTooMany: the email has MaxPerEmail subscriptions already.
	ErrTooMany = errors.New("comic: too many subscriptions for this email")
)

// Subscription asks that Email be told about every comic matching Body
// (a partial comic: every field of Body equal, strings case-insensitively).
type Subscription struct {
	// ID is derived from (email, canonical body), so it is the same for
	// the same request.
	ID    string `json:"id"`
	Email string `json:"email"`
	// Body is the canonical form of the partial comic.
	Body json.RawMessage `json:"body"`
	// Pattern is the body's SearchPattern (its sorted field names).
	Pattern string `json:"pattern"`
	// Shard is the pattern shard the subscription is indexed under: the
	// pattern, or "pattern#k" once the pattern is bloated (see
	// StoreConfig.BloatThreshold).
	Shard string `json:"shard"`
	// NotifyURL, when set, is the subscriber's own destination (a POST
	// /notify webhook); otherwise the flow's destination is used.
	NotifyURL string `json:"notify_url,omitempty"`
	// Secret signs notifications to NotifyURL; it is shown only in the
	// answer that creates the subscription.
	Secret    string    `json:"secret,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// StoreConfig configures a Store.
type StoreConfig struct {
	// MaxPerEmail bounds the subscriptions of one email. Default 1000.
	MaxPerEmail int
	// BloatThreshold is the number of subscriptions of one SearchPattern
	// after which new subscriptions of that pattern go to a new shard
	// "pattern#k" (the seed's mitigation for a bloated pattern): no index
	// set grows past about this size, so one lookup never blocks Redis on
	// a huge set. Default 10000.
	BloatThreshold int
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// WithDefaults returns c with every zero field set to its default.
func (c StoreConfig) WithDefaults() StoreConfig {
	if c.MaxPerEmail == 0 {
		c.MaxPerEmail = 1000
	}
	if c.BloatThreshold == 0 {
		c.BloatThreshold = 10000
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c StoreConfig) Validate() error {
	var errs []error
	if c.MaxPerEmail < 1 || c.MaxPerEmail > 100000 {
		errs = append(errs, fmt.Errorf("comic: max per email %d out of range 1..100000", c.MaxPerEmail))
	}
	if c.BloatThreshold < 1 {
		errs = append(errs, fmt.Errorf("comic: bloat threshold %d must be positive", c.BloatThreshold))
	}
	return errors.Join(errs...)
}

// Store keeps subscriptions and their indexes in Redis:
//
//	ds:{comic-subs}:comic:subs                 hash: id → Subscription JSON
//	ds:{comic-subs}:comic:email:<email>        set: ids of one email
//	ds:{comic-subs}:comic:idx:<shard>:<values> set: ids of one pattern shard and values
//	ds:{comic-subs}:comic:patterns             zset: pattern shard → subscriptions
//	ds:{comic-subs}:comic:patcount             hash: pattern → subscriptions
//	ds:{comic-subs}:comic:field:<field>        zset: value → subscriptions constraining it
//	ds:{comic-subs}:comic:fieldtotal           hash: field → subscriptions constraining it
//	ds:{comic-subs}:comic:patver               counter: changes of the set of active pattern shards
//
// Create and Delete each update all of them in one script.
type Store struct {
	rdb redis.UniversalClient
	cfg StoreConfig
}

// NewStore returns a subscription store.
func NewStore(rdb redis.UniversalClient, cfg StoreConfig) (*Store, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Store{rdb: rdb, cfg: cfg}, nil
}

var createScript = redis.NewScript(`
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 0 end
if redis.call('SCARD', KEYS[2]) >= tonumber(ARGV[5]) then return -1 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('SADD', KEYS[2], ARGV[1])
if tonumber(redis.call('ZINCRBY', KEYS[3], 1, ARGV[4])) == 1 then redis.call('INCR', KEYS[7]) end
redis.call('HINCRBY', KEYS[4], ARGV[3], 1)
redis.call('SADD', KEYS[5], ARGV[1])
for i = 8, #KEYS do
  redis.call('ZINCRBY', KEYS[i], 1, ARGV[i])
  redis.call('HINCRBY', KEYS[6], ARGV[i + #KEYS - 7], 1)
end
return 1`)

var deleteScript = redis.NewScript(`
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('SREM', KEYS[2], ARGV[1])
if tonumber(redis.call('ZINCRBY', KEYS[3], -1, ARGV[4])) <= 0 then
  redis.call('ZREM', KEYS[3], ARGV[4])
  redis.call('INCR', KEYS[7])
end
if redis.call('HINCRBY', KEYS[4], ARGV[3], -1) <= 0 then redis.call('HDEL', KEYS[4], ARGV[3]) end
redis.call('SREM', KEYS[5], ARGV[1])
for i = 8, #KEYS do
  if tonumber(redis.call('ZINCRBY', KEYS[i], -1, ARGV[i])) <= 0 then redis.call('ZREM', KEYS[i], ARGV[i]) end
  if redis.call('HINCRBY', KEYS[6], ARGV[i + #KEYS - 7], -1) <= 0 then redis.call('HDEL', KEYS[6], ARGV[i + #KEYS - 7]) end
end
return 1`)

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

// Create validates and stores a subscription of email to body. It returns
// the subscription with its secret (when NotifyURL is set); the error wraps
// ErrInvalid (a *FieldError), ErrDuplicate or ErrTooMany.
func (s *Store) Create(ctx context.Context, email string, body json.RawMessage, notifyURL string) (Subscription, error) {
	email, err := NormalizeEmail(email)
	if err != nil {
		return Subscription{}, err
	}
	b, err := ParseBody(body)
	if err != nil {
		var fe *FieldError
		if errors.As(err, &fe) {
			fe.Field = strings.TrimSuffix("body."+fe.Field, ".")
		}
		return Subscription{}, err
	}
	sub := Subscription{Email: email, Body: b.Canonical(), Pattern: b.Pattern(), CreatedAt: s.cfg.Now().UTC()}
	sub.ID = hashHex([]byte(email + "\x00" + string(sub.Body)))
	if notifyURL != "" {
		if err := ValidateNotifyURL(notifyURL); err != nil {
			return Subscription{}, err
		}
		sub.NotifyURL = notifyURL
		var raw [24]byte
		_, _ = rand.Read(raw[:])
		sub.Secret = hex.EncodeToString(raw[:])
	}
	n, err := s.rdb.HGet(ctx, patCountKey, sub.Pattern).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return Subscription{}, fmt.Errorf("comic: pattern count: %w", err)
	}
	sub.Shard = shardName(sub.Pattern, n/int64(s.cfg.BloatThreshold))
	rec, _ := json.Marshal(sub)
	keys, args := s.scriptArgs(sub, b)
	args[1] = rec
	args[4] = s.cfg.MaxPerEmail
	res, err := createScript.Run(ctx, s.rdb, keys, args...).Int64()
	switch {
	case err != nil:
		return Subscription{}, fmt.Errorf("comic: create subscription: %w", err)
	case res == 0:
		return Subscription{}, fmt.Errorf("%w: %s already subscribed to %s", ErrDuplicate, email, sub.Body)
	case res < 0:
		return Subscription{}, fmt.Errorf("%w (%d)", ErrTooMany, s.cfg.MaxPerEmail)
	}
	return sub, nil
}

// scriptArgs returns the keys and arguments shared by the create and
// delete scripts; args[1] and args[4] are left for the caller.
func (s *Store) scriptArgs(sub Subscription, b Body) ([]string, []any) {
	names := splitPattern(sub.Pattern)
	keys := []string{subsKey, emailKey(sub.Email), patternsKey, patCountKey, indexKey(sub.Shard, valuesHash(b, names)), fieldTotalKey, patVersionKey}
	args := []any{sub.ID, "", sub.Pattern, sub.Shard, 0, "", ""}
	for _, n := range names {
		keys = append(keys, fieldStatsKey(n))
		args = append(args, indexValue(b[n]))
	}
	for _, n := range names {
		args = append(args, n)
	}
	return keys, args
}

// shardName names shard k of a pattern: the pattern itself for k = 0.
func shardName(pattern string, k int64) string {
	if k <= 0 {
		return pattern
	}
	return pattern + "#" + strconv.FormatInt(k, 10)
}

// patternOfShard returns the pattern of a shard name.
func patternOfShard(shard string) string {
	p, _, _ := strings.Cut(shard, "#")
	return p
}

// Get returns one subscription, with its secret.
func (s *Store) Get(ctx context.Context, id string) (Subscription, error) {
	raw, err := s.rdb.HGet(ctx, subsKey, id).Bytes()
	if errors.Is(err, redis.Nil) {
		return Subscription{}, fmt.Errorf("%w: subscription %s", ErrNotFound, clipName(id))
	}
	if err != nil {
		return Subscription{}, fmt.Errorf("comic: get subscription: %w", err)
	}
	var sub Subscription
	if err := json.Unmarshal(raw, &sub); err != nil {
		return Subscription{}, fmt.Errorf("comic: decode subscription %s: %w", id, err)
	}
	return sub, nil
}

// ByEmail returns the subscriptions of an email, oldest first, without
// their secrets.
func (s *Store) ByEmail(ctx context.Context, email string) ([]Subscription, error) {
	email, err := NormalizeEmail(email)
	if err != nil {
		return nil, err
	}
	ids, err := s.rdb.SMembers(ctx, emailKey(email)).Result()
	if err != nil {
		return nil, fmt.Errorf("comic: subscriptions of %s: %w", email, err)
	}
	subs, err := s.load(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]Subscription, 0, len(subs))
	for _, sub := range subs {
		sub.Secret = ""
		out = append(out, sub)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// load returns the subscriptions of ids that still exist, in ids' order.
func (s *Store) load(ctx context.Context, ids []string) ([]Subscription, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	vals, err := s.rdb.HMGet(ctx, subsKey, ids...).Result()
	if err != nil {
		return nil, fmt.Errorf("comic: load subscriptions: %w", err)
	}
	out := make([]Subscription, 0, len(vals))
	for i, v := range vals {
		str, ok := v.(string)
		if !ok {
			continue // deleted meanwhile
		}
		var sub Subscription
		if err := json.Unmarshal([]byte(str), &sub); err != nil {
			return nil, fmt.Errorf("comic: decode subscription %s: %w", ids[i], err)
		}
		out = append(out, sub)
	}
	return out, nil
}

// Delete removes a subscription and its index entries. The error wraps
// ErrNotFound when there is none.
func (s *Store) Delete(ctx context.Context, id string) error {
	sub, err := s.Get(ctx, id)
	if err != nil {
		return err
	}
	b, err := ParseBody(sub.Body)
	if err != nil {
		return fmt.Errorf("comic: stored subscription %s: %w", id, err)
	}
	keys, args := s.scriptArgs(sub, b)
	res, err := deleteScript.Run(ctx, s.rdb, keys, args...).Int64()
	if err != nil {
		return fmt.Errorf("comic: delete subscription: %w", err)
	}
	if res == 0 {
		return fmt.Errorf("%w: subscription %s", ErrNotFound, id)
	}
	return nil
}

// NewSubscription is one subscription to create in bulk.
type NewSubscription struct {
	Email     string
	Body      json.RawMessage
	NotifyURL string
}

// CreateMany creates subscriptions in pipelined batches (a bulk import):
// each one is validated and stored by the same script as Create, so the
// result is the same as calling Create for each. It returns how many were
// created; duplicates and subscriptions over MaxPerEmail are skipped, and
// the first invalid one stops the import with its error (the ones before
// it are created).
func (s *Store) CreateMany(ctx context.Context, subs []NewSubscription) (int, error) {
	counts, err := s.rdb.HGetAll(ctx, patCountKey).Result()
	if err != nil {
		return 0, fmt.Errorf("comic: pattern counts: %w", err)
	}
	perPattern := map[string]int64{}
	for p, c := range counts {
		perPattern[p], _ = strconv.ParseInt(c, 10, 64)
	}
	if err := createScript.Load(ctx, s.rdb).Err(); err != nil {
		return 0, fmt.Errorf("comic: load script: %w", err)
	}
	created := 0
	const chunk = 100 // scripts per pipeline: bounds one round trip
	for start := 0; start < len(subs); start += chunk {
		pipe := s.rdb.Pipeline()
		var cmds []*redis.Cmd
		for _, in := range subs[start:min(start+chunk, len(subs))] {
			email, err := NormalizeEmail(in.Email)
			if err != nil {
				return created, err
			}
			b, err := ParseBody(in.Body)
			if err != nil {
				return created, err
			}
			sub := Subscription{Email: email, Body: b.Canonical(), Pattern: b.Pattern(), CreatedAt: s.cfg.Now().UTC()}
			sub.ID = hashHex([]byte(email + "\x00" + string(sub.Body)))
			if in.NotifyURL != "" {
				if err := ValidateNotifyURL(in.NotifyURL); err != nil {
					return created, err
				}
				sub.NotifyURL = in.NotifyURL
				var raw [24]byte
				_, _ = rand.Read(raw[:])
				sub.Secret = hex.EncodeToString(raw[:])
			}
			sub.Shard = shardName(sub.Pattern, perPattern[sub.Pattern]/int64(s.cfg.BloatThreshold))
			perPattern[sub.Pattern]++
			rec, _ := json.Marshal(sub)
			keys, args := s.scriptArgs(sub, b)
			args[1] = rec
			args[4] = s.cfg.MaxPerEmail
			cmds = append(cmds, createScript.EvalSha(ctx, pipe, keys, args...))
		}
		if _, err := pipe.Exec(ctx); err != nil && !isNoScript(err) {
			return created, fmt.Errorf("comic: create subscriptions: %w", err)
		}
		for i, c := range cmds {
			if c.Err() != nil && isNoScript(c.Err()) {
				// The script was not loaded yet: load it and retry this one.
				in := subs[start+i]
				if _, err := s.Create(ctx, in.Email, in.Body, in.NotifyURL); err == nil {
					created++
				} else if !errors.Is(err, ErrDuplicate) && !errors.Is(err, ErrTooMany) {
					return created, err
				}
				continue
			}
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

func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}
