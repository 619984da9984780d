// Package recordstore keeps records of one type in Redis as JSON by id,
// listed in id order with exact cursor paging: the store behind sources,
// watchers and subscribers.
//
// Layout.Hash keeps every record in one hash (id → JSON), for up to some
// ten thousand records. Layout.Prefix and Layout.Index keep each record at
// Prefix+id and its id in a sorted set read with ZRANGEBYLEX; both keys
// share a hash tag. With Config.Tenant set, a store also keeps each
// record's tenant and an index per tenant (see ListIn).
package recordstore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/internal/script"
	"github.com/dropstream/dropstream/internal/tenancy"
)

// Errors of a store, for errors.Is.
var (
	ErrNotFound = errors.New("recordstore: record not found") // no record has the id.
	ErrFull     = errors.New("recordstore: store full")       // the store holds Config.Max records and the record is new.
	ErrTooLarge = errors.New("recordstore: record too large") // a record's JSON exceeds Config.MaxSize.
	// ErrCorrupt: a stored record cannot be decoded (default Decode).
	ErrCorrupt = errors.New("recordstore: stored record unreadable")
	// ErrConflict: Update found the record changed by others too often.
	ErrConflict = errors.New("recordstore: too much contention")
	// ErrTaken: Put of a record whose id another tenant's record holds.
	ErrTaken = errors.New("recordstore: id held by another tenant")
)

// Layout is where a store keeps its records: the one Hash (id → JSON), or
// each at Prefix+id with the ids in the sorted set Index.
type Layout struct {
	Hash, Prefix, Index string
}

// Config configures a Store. Zero fields take their defaults.
type Config[T any] struct {
	Layout Layout
	// Max bounds the records (a new Put past it: ErrFull). 0: no bound.
	Max int
	// MaxSize bounds one record's JSON on write (ErrTooLarge). 0: no bound.
	MaxSize int
	// Decode reads a stored record, its errors returned as they are.
	// Default: json.Unmarshal, errors wrapping ErrCorrupt.
	Decode func(id string, raw []byte) (T, error)
	// Tenant returns a record's tenant, which must not change once stored
	// ("" is tenancy.Open). Set, the store keeps an index per tenant.
	Tenant func(T) string
}

// Store keeps records of type T. It is safe for concurrent use.
type Store[T any] struct {
	rdb redis.UniversalClient
	cfg Config[T]
}

// maxIDBytes bounds the ids quoted in errors.
const maxIDBytes = 80

// New returns a store over rdb.
func New[T any](rdb redis.UniversalClient, cfg Config[T]) (*Store[T], error) {
	l := cfg.Layout
	if (l.Hash == "") == (l.Prefix == "" || l.Index == "") || (l.Hash != "" && (l.Prefix != "" || l.Index != "")) {
		return nil, fmt.Errorf("recordstore: layout %+v: want Hash, or Prefix and Index", l)
	}
	if cfg.Max < 0 || cfg.MaxSize < 0 {
		return nil, fmt.Errorf("recordstore: max %d, max size %d: want 0 or more", cfg.Max, cfg.MaxSize)
	}
	if cfg.Decode == nil {
		cfg.Decode = decode[T]
	}
	return &Store[T]{rdb: rdb, cfg: cfg}, nil
}

// InHash returns a store of the records in the hash key (id → JSON), with
// no bounds, no tenants and the default Decode.
func InHash[T any](rdb redis.UniversalClient, key string) *Store[T] {
	return &Store[T]{rdb: rdb, cfg: Config[T]{Layout: Layout{Hash: key}, Decode: decode[T]}}
}

// decode is the default Config.Decode.
func decode[T any](id string, raw []byte) (T, error) {
	var rec T
	if err := json.Unmarshal(raw, &rec); err != nil {
		return rec, fmt.Errorf("%w: %q: %w", ErrCorrupt, clip.Marked(id, maxIDBytes), err)
	}
	return rec, nil
}

// Key returns id's Redis key (the hash in the Hash layout), for scripts.
func (s *Store[T]) Key(id string) string {
	if s.cfg.Layout.Hash != "" {
		return s.cfg.Layout.Hash
	}
	return s.cfg.Layout.Prefix + id
}

// putScript writes a record unless the store is full and it is new, or the
// id is another tenant's. KEYS: record key (or hash), index, then with
// tenants the owners hash and the tenant's index. ARGV: id, JSON, max (0:
// none), "hash" or "keys", tenant, tenancy.Open. Returns 1 written, 0
// full, -1 taken.
var putScript = script.New(`
local max = tonumber(ARGV[3])
local hash = ARGV[4] == 'hash'
local owners, tindex = KEYS[3], KEYS[4]
if hash then owners, tindex = KEYS[2], KEYS[3] end
if ARGV[5] ~= '' then
  local prev = redis.call('HGET', owners, ARGV[1])
  if not prev then
    local held
    if hash then held = redis.call('HEXISTS', KEYS[1], ARGV[1]) else held = redis.call('EXISTS', KEYS[1]) end
    if held == 1 then prev = ARGV[6] end
  end
  if prev and prev ~= ARGV[5] then return -1 end
end
if hash then
  if max > 0 and redis.call('HLEN', KEYS[1]) >= max and redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
else
  if max > 0 and redis.call('ZCARD', KEYS[2]) >= max and not redis.call('ZSCORE', KEYS[2], ARGV[1]) then return 0 end
  redis.call('SET', KEYS[1], ARGV[2])
  redis.call('ZADD', KEYS[2], 0, ARGV[1])
end
if ARGV[5] ~= '' then
  redis.call('HSET', owners, ARGV[1], ARGV[5])
  redis.call('ZADD', tindex, 0, ARGV[1])
end
return 1`)

// encode returns rec's JSON, or an error wrapping ErrTooLarge.
func (s *Store[T]) encode(id string, rec *T) ([]byte, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("recordstore: encode %q: %w", clip.Marked(id, maxIDBytes), err)
	}
	if s.cfg.MaxSize > 0 && len(b) > s.cfg.MaxSize {
		return nil, fmt.Errorf("%w: %q: %d bytes of JSON exceed %d", ErrTooLarge, clip.Marked(id, maxIDBytes), len(b), s.cfg.MaxSize)
	}
	return b, nil
}

// Put creates or replaces id's record; ErrFull when new in a full store,
// ErrTaken when id is another tenant's.
func (s *Store[T]) Put(ctx context.Context, id string, rec T) error {
	b, err := s.encode(id, &rec)
	if err != nil {
		return err
	}
	keys, layout := []string{s.Key(id), s.cfg.Layout.Index}, "keys"
	if s.cfg.Layout.Hash != "" {
		keys, layout = keys[:1], "hash"
	}
	tenant := ""
	if s.cfg.Tenant != nil {
		tenant = tenancy.Of(s.cfg.Tenant(rec))
		keys = append(keys, s.OwnersKey(), s.TenantIndex(tenant))
	}
	n, err := putScript.Run(ctx, s.rdb, keys, id, b, s.cfg.Max, layout, tenant, tenancy.Open).Int()
	if err != nil {
		return fmt.Errorf("recordstore: put %q: %w", clip.Marked(id, maxIDBytes), err)
	}
	switch n {
	case 0:
		return fmt.Errorf("%w: it holds %d records", ErrFull, s.cfg.Max)
	case -1:
		return fmt.Errorf("%w: %q", ErrTaken, clip.Marked(id, maxIDBytes))
	}
	return nil
}

// Get returns the record of id, or an error wrapping ErrNotFound.
func (s *Store[T]) Get(ctx context.Context, id string) (T, error) {
	return s.decode(id, s.get(ctx, s.rdb, id))
}

// get reads id's JSON through c (client, transaction or pipeline).
func (s *Store[T]) get(ctx context.Context, c redis.Cmdable, id string) *redis.StringCmd {
	if s.cfg.Layout.Hash != "" {
		return c.HGet(ctx, s.cfg.Layout.Hash, id)
	}
	return c.Get(ctx, s.Key(id))
}

// decode returns the record of id that cmd read, or ErrNotFound.
func (s *Store[T]) decode(id string, cmd *redis.StringCmd) (T, error) {
	var zero T
	raw, err := cmd.Bytes()
	if errors.Is(err, redis.Nil) {
		return zero, fmt.Errorf("%w: %q", ErrNotFound, clip.Marked(id, maxIDBytes))
	}
	if err != nil {
		return zero, fmt.Errorf("recordstore: get %q: %w", clip.Marked(id, maxIDBytes), err)
	}
	return s.cfg.Decode(id, raw)
}

// maxTries bounds the attempts of Update when others change the record.
const maxTries = 16

// Update changes id's record with fn in an optimistic transaction, retried
// a few times (then ErrConflict); fn may rerun and its error aborts. It
// returns the record written, or ErrNotFound.
func (s *Store[T]) Update(ctx context.Context, id string, fn func(*T) error) (T, error) {
	return s.update(ctx, id, fn, nil)
}

// update is Update whose transaction also queues also(pipe, old, new)
// when also is not nil.
func (s *Store[T]) update(ctx context.Context, id string, fn func(*T) error, also func(pipe redis.Pipeliner, old, rec T)) (T, error) {
	var out T
	for range maxTries {
		err := s.rdb.Watch(ctx, func(tx *redis.Tx) error {
			cmd := s.get(ctx, tx, id)
			rec, err := s.decode(id, cmd)
			if err != nil {
				return err
			}
			old, _ := s.decode(id, cmd) // a copy fn cannot change
			if err := fn(&rec); err != nil {
				return err
			}
			b, err := s.encode(id, &rec)
			if err != nil {
				return err
			}
			_, err = tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
				if s.cfg.Layout.Hash != "" {
					pipe.HSet(ctx, s.cfg.Layout.Hash, id, b)
				} else {
					pipe.Set(ctx, s.Key(id), b, 0)
				}
				if also != nil {
					also(pipe, old, rec)
				}
				return nil
			})
			out = rec
			return err
		}, s.Key(id))
		if errors.Is(err, redis.TxFailedErr) {
			continue
		}
		return out, err
	}
	var zero T
	return zero, fmt.Errorf("%w: update %q", ErrConflict, clip.Marked(id, maxIDBytes))
}

// Page is one page of List.
type Page[T any] struct {
	// Items are the records, in id order; never nil.
	Items []T
	// NextCursor is the last id covered when more follow, "" on the last page.
	NextCursor string
}

// loadChunk is how many records one MGET or HMGET reads.
const loadChunk = 500

// List returns up to limit records after cursor ("" first) in id order;
// unreadable records are left out, their errors returned with the page.
func (s *Store[T]) List(ctx context.Context, cursor string, limit int) (Page[T], error) {
	return s.list(ctx, "", nil, cursor, limit)
}

// list is List over index ("" for the store's own), keeping the records
// keep accepts (nil: every one); a Redis failure returns a zero page.
func (s *Store[T]) list(ctx context.Context, index string, keep func(T) bool, cursor string, limit int) (Page[T], error) {
	if limit < 1 {
		return Page[T]{}, fmt.Errorf("recordstore: list limit %d: want 1 or more", limit)
	}
	ids, more, err := s.ids(ctx, index, cursor)
	if err != nil {
		return Page[T]{}, err
	}
	page := Page[T]{Items: []T{}}
	var errs []error
	for len(page.Items) < limit {
		if len(ids) == 0 {
			if ids, err = more(limit - len(page.Items)); err != nil {
				return Page[T]{}, err
			}
			if len(ids) == 0 {
				return page, errors.Join(errs...)
			}
		}
		n := min(limit-len(page.Items), len(ids), loadChunk)
		if page.Items, errs, err = s.decodeAll(ctx, ids[:n], keep, page.Items, errs); err != nil {
			return Page[T]{}, err
		}
		cursor, ids = ids[n-1], ids[n:]
	}
	if len(ids) == 0 {
		if ids, err = more(1); err != nil {
			return Page[T]{}, err
		}
	}
	if len(ids) > 0 {
		page.NextCursor = cursor
	}
	return page, errors.Join(errs...)
}

// ids returns index's ids after cursor known at once, and a func for n more.
func (s *Store[T]) ids(ctx context.Context, index, cursor string) ([]string, func(n int) ([]string, error), error) {
	if index == "" && s.cfg.Layout.Hash != "" {
		all, err := s.rdb.HKeys(ctx, s.cfg.Layout.Hash).Result()
		if err != nil {
			return nil, nil, fmt.Errorf("recordstore: list: %w", err)
		}
		slices.Sort(all)
		all = all[sort.SearchStrings(all, cursor):]
		if len(all) > 0 && all[0] == cursor {
			all = all[1:]
		}
		return all, func(int) ([]string, error) { return nil, nil }, nil
	}
	index = cmp.Or(index, s.cfg.Layout.Index)
	after := cursor
	return nil, func(n int) ([]string, error) {
		start := "-"
		if after != "" {
			start = "(" + after
		}
		ids, err := s.rdb.ZRangeByLex(ctx, index, &redis.ZRangeBy{Min: start, Max: "+", Count: int64(n)}).Result()
		if err != nil {
			return nil, fmt.Errorf("recordstore: list: %w", err)
		}
		if len(ids) > 0 {
			after = ids[len(ids)-1]
		}
		return ids, nil
	}, nil
}

// GetMany returns the records of ids in their order, leaving out those
// with none; unreadable records are left out, their errors returned with
// the rest.
func (s *Store[T]) GetMany(ctx context.Context, ids []string) ([]T, error) {
	out := make([]T, 0, len(ids))
	var bad []error
	for start := 0; start < len(ids); start += loadChunk {
		var err error
		if out, bad, err = s.decodeAll(ctx, ids[start:min(start+loadChunk, len(ids))], nil, out, bad); err != nil {
			return nil, err
		}
	}
	return out, errors.Join(bad...)
}

// decodeAll appends to out the records of ids that exist and keep accepts
// (nil: every one), and to bad the errors of unreadable ones.
func (s *Store[T]) decodeAll(ctx context.Context, ids []string, keep func(T) bool, out []T, bad []error) ([]T, []error, error) {
	raws, err := s.load(ctx, ids)
	if err != nil {
		return nil, nil, err
	}
	out, bad = s.decodeRaws(ids, raws, keep, out, bad)
	return out, bad, nil
}

// decodeRaws appends to out the records of raws (ids' stored JSON, nil for
// none) that keep accepts (nil: every one), and to bad the errors of
// unreadable ones.
func (s *Store[T]) decodeRaws(ids []string, raws [][]byte, keep func(T) bool, out []T, bad []error) ([]T, []error) {
	for i, raw := range raws {
		if raw == nil {
			continue // deleted meanwhile
		}
		rec, err := s.cfg.Decode(ids[i], raw)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		if keep != nil && !keep(rec) {
			continue // deleted and stored again by another tenant meanwhile
		}
		out = append(out, rec)
	}
	return out, bad
}

// load returns the stored JSON of ids, nil for those with none.
func (s *Store[T]) load(ctx context.Context, ids []string) ([][]byte, error) {
	var vals []any
	var err error
	if s.cfg.Layout.Hash != "" {
		vals, err = s.rdb.HMGet(ctx, s.cfg.Layout.Hash, ids...).Result()
	} else {
		keys := make([]string, len(ids))
		for i, id := range ids {
			keys[i] = s.Key(id)
		}
		vals, err = s.rdb.MGet(ctx, keys...).Result()
	}
	if err != nil {
		return nil, fmt.Errorf("recordstore: load: %w", err)
	}
	out := make([][]byte, len(ids))
	for i, v := range vals {
		if str, ok := v.(string); ok {
			out[i] = []byte(str)
		}
	}
	return out, nil
}

// Len returns the number of records.
func (s *Store[T]) Len(ctx context.Context) (int64, error) {
	var n int64
	var err error
	if s.cfg.Layout.Hash != "" {
		n, err = s.rdb.HLen(ctx, s.cfg.Layout.Hash).Result()
	} else {
		n, err = s.rdb.ZCard(ctx, s.cfg.Layout.Index).Result()
	}
	if err != nil {
		return 0, fmt.Errorf("recordstore: count: %w", err)
	}
	return n, nil
}

// All returns every readable record in id order (never nil); more than
// Config.Max records is ErrFull.
func (s *Store[T]) All(ctx context.Context) ([]T, error) {
	if s.cfg.Max > 0 {
		n, err := s.Len(ctx)
		if err != nil {
			return nil, err
		}
		if n > int64(s.cfg.Max) {
			return nil, fmt.Errorf("%w: %d records exceed %d", ErrFull, n, s.cfg.Max)
		}
	}
	if s.cfg.Layout.Hash != "" { // one round trip: a feed's subscribables are read on every poll
		m, err := s.rdb.HGetAll(ctx, s.cfg.Layout.Hash).Result()
		if err != nil {
			return nil, fmt.Errorf("recordstore: list: %w", err)
		}
		ids := slices.Sorted(maps.Keys(m))
		raws := make([][]byte, len(ids))
		for i, id := range ids {
			raws[i] = []byte(m[id])
		}
		out, bad := s.decodeRaws(ids, raws, nil, make([]T, 0, len(ids)), nil)
		return out, errors.Join(bad...)
	}
	page, err := s.list(ctx, "", nil, "", math.MaxInt)
	return page.Items, err
}
