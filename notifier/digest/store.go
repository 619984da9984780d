package digest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/rediskey"
)

// DefaultTTL is how long batch bookkeeping is kept.
const DefaultTTL = 30 * 24 * time.Hour

// Store keeps open digest batches in Redis, in the slot of the hash tag
// the caller gives (the partition of the recipient's requests):
//
//	ds:<tag>:digest:items:<batch>|<window>  hash: item key → item (opaque bytes)
//	ds:<tag>:digest:due                     sorted set: "<batch>|<window>" scored by when it is due (Unix ms)
//	ds:<tag>:digest:seq:<batch>             counter of a ModeEvery batch's items
//	ds:<tag>:digest:seen:<batch>            hash: item key → its ModeEvery window number
//
// A batch names a (subscriber, destination) pair; an item added twice is
// filed once. It is safe for concurrent use.
type Store struct {
	rdb redis.UniversalClient
	ttl time.Duration
}

// NewStore returns a store over rdb; ttl 0 is DefaultTTL.
func NewStore(rdb redis.UniversalClient, ttl time.Duration) *Store {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return &Store{rdb: rdb, ttl: ttl}
}

func key(tag, kind, name string) string { return rediskey.Key(tag, "digest", kind, name) }
func dueKey(tag string) string          { return rediskey.Key(tag, "digest", "due") }

// AddTimed files an item of a time window, due at w.End.
func (s *Store) AddTimed(ctx context.Context, tag, batch, itemKey string, item []byte, w Window) error {
	name := batch + "|" + w.ID
	ik := key(tag, "items", name)
	_, err := s.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.HSetNX(ctx, ik, itemKey, item)
		pipe.PExpire(ctx, ik, s.ttl)
		pipe.ZAddNX(ctx, dueKey(tag), redis.Z{Score: float64(w.End.UnixMilli()), Member: name})
		return nil
	})
	if err != nil {
		return fmt.Errorf("digest: add to %s: %w", name, err)
	}
	return nil
}

// seqScript gives an item its ModeEvery sequence number once.
// KEYS: seen, seq. ARGV: item key, ttl ms.
var seqScript = redis.NewScript(`
local n = redis.call('HGET', KEYS[1], ARGV[1])
if n then return tonumber(n) end
n = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], ARGV[1], n)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return n`)

// AddCounted files an item of a ModeEvery policy; a full window is due now.
func (s *Store) AddCounted(ctx context.Context, tag, batch, itemKey string, item []byte, p Policy, now time.Time) (Window, error) {
	seq, err := seqScript.Run(ctx, s.rdb, []string{key(tag, "seen", batch), key(tag, "seq", batch)}, itemKey, s.ttl.Milliseconds()).Int64()
	if err != nil {
		return Window{}, fmt.Errorf("digest: sequence of %s: %w", batch, err)
	}
	w := p.CountWindow(seq)
	name := batch + "|" + w.ID
	ik := key(tag, "items", name)
	var n *redis.IntCmd
	_, err = s.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.HSetNX(ctx, ik, itemKey, item)
		pipe.PExpire(ctx, ik, s.ttl)
		n = pipe.HLen(ctx, ik)
		return nil
	})
	if err != nil {
		return Window{}, fmt.Errorf("digest: add to %s: %w", name, err)
	}
	if n.Val() >= int64(p.Every) {
		if err := s.rdb.ZAddNX(ctx, dueKey(tag), redis.Z{Score: float64(now.UnixMilli()), Member: name}).Err(); err != nil {
			return Window{}, fmt.Errorf("digest: mark %s due: %w", name, err)
		}
	}
	return w, nil
}

// Batch is a due window's items.
type Batch struct {
	Tag    string
	Batch  string
	Window string
	// Keys and Items are the items' keys and values, in key order.
	Keys  []string
	Items [][]byte
}

// Due returns up to limit batches of tag due at or before now.
func (s *Store) Due(ctx context.Context, tag string, now time.Time, limit int) ([]Batch, error) {
	names, err := s.rdb.ZRangeByScore(ctx, dueKey(tag), &redis.ZRangeBy{Min: "-inf",
		Max: strconv.FormatInt(now.UnixMilli(), 10), Count: int64(max(limit, 1))}).Result()
	if err != nil {
		return nil, fmt.Errorf("digest: due of %s: %w", tag, err)
	}
	out := make([]Batch, 0, len(names))
	for _, name := range names {
		i := strings.LastIndexByte(name, '|')
		if i < 0 {
			continue
		}
		items, err := s.rdb.HGetAll(ctx, key(tag, "items", name)).Result()
		if err != nil {
			return nil, fmt.Errorf("digest: items of %s: %w", name, err)
		}
		b := Batch{Tag: tag, Batch: name[:i], Window: name[i+1:], Keys: slices.Sorted(maps.Keys(items))}
		for _, k := range b.Keys {
			b.Items = append(b.Items, []byte(items[k]))
		}
		out = append(out, b)
	}
	return out, nil
}

// doneScript removes the flushed items and, when none is left, the due
// entry. KEYS: items, due. ARGV: member, item keys.
var doneScript = redis.NewScript(`
for i = 2, #ARGV do redis.call('HDEL', KEYS[1], ARGV[i]) end
if redis.call('HLEN', KEYS[1]) == 0 then redis.call('ZREM', KEYS[2], ARGV[1]) end
return 1`)

// Done removes a flushed batch's items; items added since stay due.
func (s *Store) Done(ctx context.Context, b Batch) error {
	name := b.Batch + "|" + b.Window
	args := make([]any, 0, len(b.Keys)+1)
	args = append(args, name)
	for _, k := range b.Keys {
		args = append(args, k)
	}
	if err := doneScript.Run(ctx, s.rdb, []string{key(b.Tag, "items", name), dueKey(b.Tag)}, args...).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("digest: done %s: %w", name, err)
	}
	return nil
}
