// Package digest batches notifications into windows per subscriber and
// destination, and sends each window's batch once as one digest.
//
// A Policy names the window: each, every n, hourly, daily or weekly at a
// local time. Time windows are local calendar windows (a day may last 23
// or 25 hours).
//
// The Store keeps open batches in Redis. A digest is delivered under the
// key (subscriber, destination, "digest", window id), so a window flushed
// twice is still sent once.
package digest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/internal/rediskey"
)

// Modes of a Policy.
const (
	// ModeEach sends every notification at once (no digest).
	ModeEach = "each"
	// ModeEvery batches every N notifications.
	ModeEvery = "every"
	// ModeHourly batches by local clock hour.
	ModeHourly = "hourly"
	// ModeDaily batches by local day, ending at At.
	ModeDaily = "daily"
	// ModeWeekly batches by week, ending on Weekday at At.
	ModeWeekly = "weekly"
)

// MaxEvery bounds Policy.Every.
const MaxEvery = 1000

// ErrInvalidPolicy is wrapped by Policy.Validate's errors.
var ErrInvalidPolicy = errors.New("digest: invalid policy")

// Policy is how a subscriber's notifications are batched; zero is ModeEach.
type Policy struct {
	// Mode is one of the Mode constants; empty means ModeEach.
	Mode string `json:"mode,omitempty"`
	// Every is the batch size of ModeEvery, 2..MaxEvery.
	Every int `json:"every,omitempty"`
	// At is the local "HH:MM" a daily or weekly window ends. Default "08:00".
	At string `json:"at,omitempty"`
	// Weekday is the day a weekly window ends. Default "monday".
	Weekday string `json:"weekday,omitempty"`
}

// Batches reports whether the policy batches at all.
func (p Policy) Batches() bool { return p.Mode != "" && p.Mode != ModeEach }

// Validate reports why p is not a policy.
func (p Policy) Validate() error {
	var errs []error
	switch p.Mode {
	case "", ModeEach, ModeHourly:
	case ModeEvery:
		if p.Every < 2 || p.Every > MaxEvery {
			errs = append(errs, fmt.Errorf("every %d: want 2..%d", p.Every, MaxEvery))
		}
	case ModeDaily, ModeWeekly:
		if p.At != "" {
			if _, err := ParseClock(p.At); err != nil {
				errs = append(errs, err)
			}
		}
		if _, err := parseWeekday(p.Weekday); p.Mode == ModeWeekly && err != nil {
			errs = append(errs, err)
		}
	default:
		errs = append(errs, fmt.Errorf("mode %q: want each, every, hourly, daily or weekly", clip.Marked(p.Mode, maxQuoted)))
	}
	if p.Mode != ModeEvery && p.Every != 0 {
		errs = append(errs, errors.New("every is only for mode every"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidPolicy, err)
	}
	return nil
}

// Window is one batch window.
type Window struct {
	// ID names the window stably, e.g. "daily:2026-11-22T08:00+01:00" (its
	// end) or "every:42" (the 43rd batch).
	ID string
	// End is when a time window is due; zero for ModeEvery (due when full).
	End time.Time
}

// TimeWindow returns p's window holding t in loc; it fails for ModeEach
// and ModeEvery.
func (p Policy) TimeWindow(t time.Time, loc *time.Location) (Window, error) {
	loc = cmp.Or(loc, time.UTC)
	lt := t.In(loc)
	switch p.Mode {
	case ModeHourly:
		start := time.Date(lt.Year(), lt.Month(), lt.Day(), lt.Hour(), 0, 0, 0, loc)
		end := start.Add(time.Hour)
		return Window{ID: "hourly:" + end.UTC().Format("2006-01-02T15:04Z"), End: end}, nil
	case ModeDaily, ModeWeekly:
		c, _ := ParseClock(cmp.Or(p.At, "08:00"))
		days, period := 0, 1 // to the window's end, and between two ends
		if p.Mode == ModeWeekly {
			wd, _ := parseWeekday(p.Weekday)
			days, period = (int(wd)-int(lt.Weekday())+7)%7, 7
		}
		end := time.Date(lt.Year(), lt.Month(), lt.Day()+days, c.Hour, c.Minute, 0, 0, loc)
		if !end.After(lt) {
			end = time.Date(lt.Year(), lt.Month(), lt.Day()+days+period, c.Hour, c.Minute, 0, 0, loc)
		}
		return Window{ID: p.Mode + ":" + end.Format("2006-01-02T15:04Z07:00"), End: end}, nil
	}
	return Window{}, fmt.Errorf("digest: mode %q has no time windows", p.Mode)
}

// CountWindow returns the window of the seq-th notification (from 1) of a
// ModeEvery policy: batch (seq-1)/Every.
func (p Policy) CountWindow(seq int64) Window {
	return Window{ID: "every:" + strconv.FormatInt((seq-1)/int64(max(p.Every, 1)), 10)}
}

// Clock is a local time of day.
type Clock struct{ Hour, Minute int }

// ParseClock parses "HH:MM" (00:00..23:59).
func ParseClock(s string) (Clock, error) {
	h, m, ok := strings.Cut(s, ":")
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if !ok || len(h) != 2 || len(m) != 2 || err1 != nil || err2 != nil || hh < 0 || hh > 23 || mm < 0 || mm > 59 {
		return Clock{}, fmt.Errorf("time %q: want HH:MM", clip.Marked(s, maxQuoted))
	}
	return Clock{hh, mm}, nil
}

// Minutes returns the clock as minutes after midnight.
func (c Clock) Minutes() int { return c.Hour*60 + c.Minute }

func parseWeekday(s string) (time.Weekday, error) {
	if s == "" {
		return time.Monday, nil
	}
	for d := time.Sunday; d <= time.Saturday; d++ {
		if strings.EqualFold(s, d.String()) {
			return d, nil
		}
	}
	return 0, fmt.Errorf("weekday %q: want monday..sunday", clip.Marked(s, maxQuoted))
}

// maxQuoted bounds outside input quoted in an error (see clip.Marked).
const maxQuoted = 64

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
	args := []any{name}
	for _, k := range b.Keys {
		args = append(args, k)
	}
	if err := doneScript.Run(ctx, s.rdb, []string{key(b.Tag, "items", name), dueKey(b.Tag)}, args...).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("digest: done %s: %w", name, err)
	}
	return nil
}
