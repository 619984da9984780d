package offer

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/internal/recordstore"
	"github.com/dropstream/dropstream/internal/rediskey"
	"github.com/dropstream/dropstream/internal/script"
)

// catalogTag is the hash tag of every catalog key, so one script updates
// the index and a handler's offers together.
const catalogTag = "{" + Name + ".catalog}"

func catalogKey(parts ...string) string {
	return rediskey.Key(catalogTag, append([]string{"offer"}, parts...)...)
}

// Catalog stores the sell offers, their index, change streams and the
// TranslateIds cache. It is safe for concurrent use.
type Catalog struct {
	rdb redis.UniversalClient
	cfg Config
}

var (
	indexKey = catalogKey("index")
	epochKey = catalogKey("epoch")
)

func offersKey(h string) string  { return catalogKey("offers", h) }
func changesKey(h string) string { return catalogKey("changes", h) }
func versionKey(h string) string { return catalogKey("version", h) }

// putScript moves or writes an offer if the index still holds the handler
// the caller read (ARGV[3]): 1 created, 0 replaced, -1 index changed.
// Change entries carry the handler's version v and the catalog epoch e.
var putScript = script.New(`
local cur = redis.call('HGET', KEYS[1], ARGV[1]) or ''
if cur ~= ARGV[3] then return -1 end
local e = redis.call('INCR', KEYS[5])
if cur ~= '' and cur ~= ARGV[2] then
  redis.call('HDEL', KEYS[6], ARGV[1])
  local v = redis.call('INCR', KEYS[8])
  redis.call('XADD', KEYS[7], 'MAXLEN', '~', ARGV[5], '*', 'id', ARGV[1], 'op', 'del', 'v', v, 'e', e)
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[4])
local v = redis.call('INCR', KEYS[4])
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[5], '*', 'id', ARGV[1], 'op', 'put', 'v', v, 'e', e)
if cur == '' then return 1 end
return 0`)

// deleteScript removes an offer held by handler ARGV[2]: 1 removed, 0 not
// there, -1 when the index changed.
var deleteScript = script.New(`
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if not cur then return 0 end
if cur ~= ARGV[2] then return -1 end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
local v = redis.call('INCR', KEYS[4])
local e = redis.call('INCR', KEYS[5])
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[3], '*', 'id', ARGV[1], 'op', 'del', 'v', v, 'e', e)
return 1`)

// ErrConflict: an offer changed handler while written; retrying is safe.
var ErrConflict = errors.New("offer changed concurrently")

// check wraps ErrInvalidOffer when o is out of bounds or its handler unknown.
func (c *Catalog) check(o Offer) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if _, ok := c.cfg.kindOf(o.Handler); !ok {
		return fmt.Errorf("%w: handler %q is not one of the configured handlers", ErrInvalidOffer, o.Handler)
	}
	return nil
}

// Put creates or replaces offers and indexes their handlers; created[i]
// says whether offers[i] was new. An invalid offer fails before any write.
func (c *Catalog) Put(ctx context.Context, offers ...Offer) (created []bool, err error) {
	bodies := make([][]byte, len(offers))
	ids := make([]string, len(offers))
	for i, o := range offers {
		if err := c.check(o); err != nil {
			return nil, fmt.Errorf("offer %d: %w", i, err)
		}
		bodies[i], _ = json.Marshal(o)
		ids[i] = o.ID
	}
	created = make([]bool, len(offers))
	const chunk = 500
	for start := 0; start < len(offers); start += chunk {
		end := min(start+chunk, len(offers))
		cur, err := c.rdb.HMGet(ctx, indexKey, ids[start:end]...).Result()
		if err != nil {
			return nil, fmt.Errorf("offer index: %w", err)
		}
		calls := make([]script.Call, end-start)
		for i := start; i < end; i++ {
			old, _ := cur[i-start].(string)
			h := offers[i].Handler
			oldH := cmp.Or(old, h)
			calls[i-start] = script.Call{Keys: []string{indexKey, offersKey(h), changesKey(h), versionKey(h), epochKey,
				offersKey(oldH), changesKey(oldH), versionKey(oldH)}, Args: []any{ids[i], h, old, bodies[i], c.cfg.ChangeLogLength}}
		}
		cmds, _ := putScript.RunAll(ctx, c.rdb, calls) // errors are read per command
		for i, cmd := range cmds {
			n, err := cmd.Int64()
			switch {
			case err != nil:
				return nil, fmt.Errorf("put offer %s: %w", ids[start+i], err)
			case n < 0:
				return nil, fmt.Errorf("put offer %s: %w", ids[start+i], ErrConflict)
			}
			created[start+i] = n == 1
		}
	}
	return created, nil
}

// Get returns an offer, or ErrNotFound.
func (c *Catalog) Get(ctx context.Context, id string) (Offer, error) {
	h, err := c.Handler(ctx, id)
	if err != nil {
		return Offer{}, err
	}
	o, err := recordstore.InHash[Offer](c.rdb, offersKey(h)).Get(ctx, id)
	if errors.Is(err, recordstore.ErrNotFound) {
		return Offer{}, ErrNotFound
	}
	if err != nil {
		return Offer{}, fmt.Errorf("get offer %s: %w", id, err)
	}
	return o, nil
}

// Handler returns offer id's handler in the SellOffers index, or ErrNotFound.
func (c *Catalog) Handler(ctx context.Context, id string) (string, error) {
	h, err := c.rdb.HGet(ctx, indexKey, id).Result()
	if errors.Is(err, redis.Nil) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("offer index: %w", err)
	}
	return h, nil
}

// Delete removes an offer from its handler and the index, or ErrNotFound.
func (c *Catalog) Delete(ctx context.Context, id string) error {
	for try := 0; try < 3; try++ {
		h, err := c.Handler(ctx, id)
		if err != nil {
			return err
		}
		n, err := deleteScript.Run(ctx, c.rdb, []string{indexKey, offersKey(h), changesKey(h), versionKey(h), epochKey},
			id, h, c.cfg.ChangeLogLength).Int64()
		if err != nil {
			return fmt.Errorf("delete offer %s: %w", id, err)
		}
		switch n {
		case 1:
			return nil
		case 0:
			return ErrNotFound
		}
	}
	return fmt.Errorf("delete offer %s: %w", id, ErrConflict)
}

// List returns limit offers from cursor ("" to start) and the next ("" at
// the end), with HSCAN's guarantees; a bad cursor wraps ErrInvalidOffer.
func (c *Catalog) List(ctx context.Context, cursor string, limit int) ([]Offer, string, error) {
	cur, skip, err := parseListCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	if limit < 1 {
		return nil, "", fmt.Errorf("%w: limit %d: want 1 or more", ErrInvalidOffer, limit)
	}
	out := make([]Offer, 0, min(limit, 1000))
	for {
		kv, next, err := c.rdb.HScan(ctx, indexKey, cur, "", listScanCount).Result()
		if err != nil {
			return nil, "", fmt.Errorf("offer index: %w", err)
		}
		entries := len(kv) / 2
		skip = min(skip, entries)
		pipe := c.rdb.Pipeline()
		cmds := make([]*redis.StringCmd, 0, entries-skip)
		for i := skip; i < entries; i++ {
			cmds = append(cmds, pipe.HGet(ctx, offersKey(kv[2*i+1]), kv[2*i]))
		}
		_, _ = pipe.Exec(ctx) // each command's error is read below
		for j, cmd := range cmds {
			body, err := cmd.Result()
			if errors.Is(err, redis.Nil) {
				continue // deleted meanwhile
			}
			if err != nil {
				return nil, "", fmt.Errorf("list offers: %w", err)
			}
			var o Offer
			if err := json.Unmarshal([]byte(body), &o); err != nil {
				return nil, "", fmt.Errorf("decode offer: %w", err)
			}
			out = append(out, o)
			if len(out) == limit {
				if pos := skip + j + 1; pos < entries {
					return out, strconv.FormatUint(cur, 10) + "." + strconv.Itoa(pos), nil
				}
				if next == 0 {
					return out, "", nil
				}
				return out, strconv.FormatUint(next, 10) + ".0", nil
			}
		}
		if next == 0 {
			return out, "", nil
		}
		cur, skip = next, 0
	}
}

// listScanCount is the COUNT of every HSCAN of List: fixed, so a cursor
// returns the same entries whatever the limit.
const listScanCount = 200

// parseListCursor reads a List cursor: "", "<scan>" or "<scan>.<skip>".
func parseListCursor(cursor string) (uint64, int, error) {
	if cursor == "" {
		return 0, 0, nil
	}
	scan, skip, _ := strings.Cut(cursor, ".")
	cur, err := strconv.ParseUint(scan, 10, 64)
	n := 0
	if err == nil && skip != "" {
		n, err = strconv.Atoi(skip)
		if err == nil && (n < 0 || n > 1<<20) {
			err = errors.New("skip out of range")
		}
	}
	if err != nil {
		return 0, 0, fmt.Errorf("%w: cursor %q", ErrInvalidOffer, clip.Marked(cursor, maxQuoted))
	}
	return cur, n, nil
}

// Translation types of the TranslateIds cache.
const (
	FromProduct   = "product"
	FromSeller    = "seller"
	ToSellOffer   = "sellOffer"
	epochField    = "" // the catalog epoch a translation was computed at
	maxTranslated = 100000
)

// Translate returns the sorted ids of toType that fromID of fromType
// translates to, and whether they came from the cache (served while the
// catalog epoch is unchanged, at most TranslateTTL).
func (c *Catalog) Translate(ctx context.Context, fromType, fromID, toType string) (ids []string, cached bool, err error) {
	if fromType != FromProduct && fromType != FromSeller || toType != ToSellOffer || !validID(fromID) {
		return nil, false, fmt.Errorf("%w: translate %q %q to %q: want product or seller ids to sellOffer", ErrInvalidOffer, fromType, clip.Marked(fromID, maxQuoted), toType)
	}
	key := catalogKey("translate", fromType+"_"+fromID+"_"+toType) // the TranslateIds cache id
	pipe := c.rdb.Pipeline()
	rec := pipe.HGetAll(ctx, key)
	epoch := pipe.Get(ctx, epochKey)
	_, _ = pipe.Exec(ctx)
	if err := rec.Err(); err != nil {
		return nil, false, fmt.Errorf("translate cache: %w", err)
	}
	cur, err := epoch.Result() // "" before the first change
	if err != nil && err != redis.Nil {
		return nil, false, fmt.Errorf("catalog epoch: %w", err)
	}
	if m := rec.Val(); len(m) > 0 && m[epochField] == cur {
		delete(m, epochField)
		return slices.Sorted(maps.Keys(m)), true, nil
	}
	if ids, err = c.scan(ctx, fromType, fromID); err != nil {
		return nil, false, err
	}
	fields := []any{epochField, cur}
	for _, id := range ids {
		fields = append(fields, id, "1")
	}
	tx := c.rdb.TxPipeline()
	tx.Del(ctx, key)
	tx.HSet(ctx, key, fields...)
	tx.PExpire(ctx, key, c.cfg.TranslateTTL)
	if _, err := tx.Exec(ctx); err != nil {
		return nil, false, fmt.Errorf("translate cache write: %w", err)
	}
	return ids, false, nil
}

// scan returns the sorted ids of the offers whose product or seller is fromID.
func (c *Catalog) scan(ctx context.Context, fromType, fromID string) ([]string, error) {
	var ids []string
	for _, h := range c.cfg.Handlers {
		it := c.rdb.HScan(ctx, offersKey(h.Tag), 0, "", 1000).Iterator()
		for it.Next(ctx) && len(ids) <= maxTranslated {
			id := it.Val()
			it.Next(ctx) // its value
			var o struct {
				ProductID string `json:"productId"`
				SellerID  string `json:"sellerId"`
			}
			if err := json.Unmarshal([]byte(it.Val()), &o); err != nil {
				return nil, fmt.Errorf("translate scan: offer %s: %w", id, err)
			}
			if fromType == FromProduct && o.ProductID == fromID || fromType == FromSeller && o.SellerID == fromID {
				ids = append(ids, id)
			}
		}
		if err := it.Err(); err != nil {
			return nil, fmt.Errorf("translate scan: %w", err)
		}
		if len(ids) > maxTranslated {
			return nil, fmt.Errorf("translate %s %s: more than %d ids", fromType, clip.Marked(fromID, maxQuoted), maxTranslated)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}
