package comic

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/propagation"

	"github.com/dropstream/dropstream/internal/settings"
	"github.com/dropstream/dropstream/notifier/history"
	"github.com/dropstream/dropstream/stream"
)

// MaxHoldWindow bounds a hold window, the flow's and a listing's own.
const MaxHoldWindow = 24 * time.Hour

// HoldConfig configures purchase holds. Zero fields take their defaults.
type HoldConfig struct {
	// Window is a wave's hold when its listing sets none, 1s..MaxHoldWindow.
	// Default 10 minutes.
	Window time.Duration `default:"10m" range:"1s..24h"`
	// WaveSize is the subscriptions told per wave, 1..MaxRequestBatch. Default 20.
	WaveSize int `default:"20" range:"1..100"`
	// Poll is how often ServiceWaves looks for holds that ended. Default 1s.
	Poll time.Duration `default:"1s" range:"1ns.."`
}

// WithDefaults returns c with every zero field set to its default.
func (c HoldConfig) WithDefaults() HoldConfig {
	settings.Defaults(&c)
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c HoldConfig) Validate() error {
	return settings.Check("comic: hold", &c)
}

// ErrHoldActive is wrapped by a *HoldError: the comic is held for the
// wave told last, and the buyer showed no token of it.
var ErrHoldActive = errors.New("comic: held for the subscribers told of it")

// HoldError is a purchase refused during a hold; it ends at EndsAt.
type HoldError struct{ EndsAt time.Time }

func (e *HoldError) Error() string {
	return ErrHoldActive.Error() + " until " + e.EndsAt.UTC().Format(time.RFC3339)
}

// Unwrap makes every HoldError match ErrHoldActive.
func (e *HoldError) Unwrap() error { return ErrHoldActive }

// Holds tells a matched comic's subscribers in waves, ordered by a lottery
// (a hash of comic, listing and subscription), and holds the comic for the
// wave told last until Window after its last send. When a hold ends unsold
// the next wave is told, once. A holder proves the hold with their
// notification's token (HoldToken). Its keys are listed in flow.go.
type Holds struct {
	rdb    redis.UniversalClient
	topics Topics
	cfg    HoldConfig
	prop   propagation.TextMapPropagator
	now    func() time.Time
}

func newHolds(rdb redis.UniversalClient, topics Topics, cfg HoldConfig, prop propagation.TextMapPropagator) *Holds {
	return &Holds{rdb: rdb, topics: topics, cfg: cfg.WithDefaults(), prop: prop, now: time.Now}
}

// waveKeys are the keys of tellLua's k, in its order.
func (h *Holds) waveKeys(id string) []string {
	tag := h.topics.tag(id)
	return []string{holdKey(tag, id), lotteryKey(tag, id), inventoryKey(tag, id), pendingKey(tag, id),
		h.topics.Notify.Stream(h.topics.Notify.Partition(id)), holdsKey(tag)}
}

// lotteryScore places sub in the waves of a listing: 48 bits of a hash,
// exact as a sorted set score.
func lotteryScore(comicID string, gen int64, sub string) int64 {
	sum := sha256.Sum256([]byte(comicID + ":" + strconv.FormatInt(gen, 10) + ":" + sub))
	return int64(binary.BigEndian.Uint64(sum[:8]) >> 16)
}

// newSalt returns a listing's random token salt.
func newSalt() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// HoldToken is the token a notification of subscription sub carries:
// "<sub>.<HMAC-SHA256(salt, sub), 32 hex digits>".
func HoldToken(salt, sub string) string {
	m := hmac.New(sha256.New, []byte(salt))
	m.Write([]byte(sub))
	return sub + "." + hex.EncodeToString(m.Sum(nil)[:16])
}

// holder returns the subscription token proves under salt, or "".
func holder(salt, token string) string {
	sub, _, ok := strings.Cut(token, ".")
	if !ok || salt == "" || !hmac.Equal([]byte(HoldToken(salt, sub)), []byte(token)) {
		return ""
	}
	return sub
}

// tellLua defines tell(k, id, w, now, meta): it tells wave w of comic id
// in one notify message and holds the comic until now plus its window, or
// ends the hold when the listing or the subscriptions are gone. k: hold,
// lottery, inv, pending, notify stream, holds zset. Returns the
// subscriptions told.
const tellLua = `
local function tell(k, id, w, now, meta)
  local h = redis.call('HMGET', k[1], 'gen', 'size', 'window')
  local inv = redis.call('HMGET', k[3], 'gen', 'comic', 'added_at_ms')
  local size = tonumber(h[2])
  local ids = {}
  if h[1] and inv[1] == h[1] then ids = redis.call('ZRANGE', k[2], (w - 1) * size, w * size - 1) end
  if #ids == 0 then
    redis.call('HSET', k[1], 'ends', 0)
    redis.call('DEL', k[2])
    redis.call('ZREM', k[6], id)
    return 0
  end
  local ends = now + tonumber(h[3])
  redis.call('HSET', k[1], 'wave', w, 'ends', ends, 'w' .. w, now .. ',' .. #ids)
  redis.call('ZADD', k[6], ends, id)
  redis.call('SADD', k[4], unpack(ids))
  local p = '{"comic_id":"' .. id .. '","gen":' .. h[1] .. ',"wave":' .. w .. ',"listed_at_ms":' .. inv[3] ..
    ',"comic":' .. inv[2] .. ',"subscription_ids":["' .. table.concat(ids, '","') .. '"]}'
  local f = {'key', id, 'type', 'comic.notify', 'payload', p}
  for _, m in ipairs(meta) do f[#f + 1] = m end
  redis.call('XADD', k[5], '*', unpack(f))
  return #ids
end
`

// extendLua defines extend(hold, holds zset, id, gen, wave, sent): that
// wave's hold lasts at least until sent plus its window, unless it is over.
const extendLua = `
local function extend(hk, zk, id, gen, wave, sent)
  local h = redis.call('HMGET', hk, 'gen', 'wave', 'ends', 'window')
  if h[1] ~= gen or h[2] ~= wave or tonumber(h[3] or '0') == 0 then return end
  local e = sent + tonumber(h[4])
  if e > tonumber(h[3]) then
    redis.call('HSET', hk, 'ends', e)
    redis.call('ZADD', zk, e, id)
  end
end
`

// nextWaveScript tells the next wave of comic ARGV[1] when its hold ended
// by ARGV[2] (ms), once per wave. KEYS tellLua's k. Returns the
// subscriptions told; -1: not due.
var nextWaveScript = redis.NewScript(tellLua + `
local h = redis.call('HMGET', KEYS[1], 'wave', 'ends')
local ends = tonumber(h[2] or '0')
if ends == 0 then redis.call('ZREM', KEYS[6], ARGV[1]) return -1 end
if ends > tonumber(ARGV[2]) then return -1 end
return tell(KEYS, ARGV[1], tonumber(h[1]) + 1, tonumber(ARGV[2]), {})`)

// Advance tells the next wave of every comic whose hold ended, at most 100
// per partition, and returns how many waves it told.
func (h *Holds) Advance(ctx context.Context) (int, error) {
	now := h.now().UnixMilli()
	told := 0
	err := eachDue(ctx, h.rdb, h.topics, holdsKey, now, func(_, id string) error {
		n, err := nextWaveScript.Run(ctx, h.rdb, h.waveKeys(id), id, now).Int()
		if err != nil {
			return fmt.Errorf("comic: next wave of %s: %w", id, err)
		}
		if n > 0 {
			told++
		}
		return nil
	})
	return told, err
}

// eachDue calls fn with the tag and member of every partition's sorted set
// key(tag) scored at most maxScore, at most 100 per partition, and joins
// the errors.
func eachDue(ctx context.Context, rdb redis.UniversalClient, t Topics, key func(tag string) string, maxScore int64, fn func(tag, id string) error) error {
	var errs []error
	for p := 0; p < t.Jobs.Partitions; p++ {
		tag := t.Jobs.HashTag(p)
		ids, err := rdb.ZRangeByScore(ctx, key(tag), &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(maxScore, 10), Count: 100}).Result()
		if err != nil {
			errs = append(errs, fmt.Errorf("comic: due in %s: %w", key(tag), err))
		}
		for _, id := range ids {
			errs = append(errs, fn(tag, id))
		}
	}
	return errors.Join(errs...)
}

// StageHoldSent is the consumer group of notify.history that starts the
// holds of notifications relayed to the notifier at their sends.
const StageHoldSent = "comic-hold-sent"

// extendScript runs extend. KEYS hold, holds zset; ARGV comic id, gen,
// wave, send time ms.
var extendScript = redis.NewScript(extendLua + `extend(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])) return 0`)

// sentStage starts a relayed notification's hold when the notifier's
// history says it was sent, by its window "<comic id>:<gen>:<wave>:<hash>".
func (h *Holds) sentStage(topic stream.Topic) stream.Stage {
	return stream.Stage{Name: StageHoldSent, Topic: topic, Handler: func(ctx context.Context, m *stream.Message) error {
		var recs []history.Record
		var err error
		switch m.Type {
		case history.TypeRecords:
			err = json.Unmarshal(m.Payload, &recs)
		case history.TypeRecord:
			recs = make([]history.Record, 1)
			err = json.Unmarshal(m.Payload, &recs[0])
		}
		if err != nil {
			return stream.Permanentf("comic: decode history %s: %w", m.ID, err)
		}
		for _, r := range recs {
			f := strings.Split(r.Window, ":")
			if r.Flow != Name || r.Status != history.StatusSent || len(f) != 4 || len(f[0]) != 32 {
				continue
			}
			tag := h.topics.tag(f[0])
			if err := extendScript.Run(ctx, h.rdb, []string{holdKey(tag, f[0]), holdsKey(tag)}, f[0], f[1], f[2], r.At.UnixMilli()).Err(); err != nil {
				return fmt.Errorf("comic: start the hold of %s: %w", f[0], err)
			}
		}
		return nil
	}}
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// HoldTimeline is a comic's latest listing: its waves in order, each with when
// it was told and its notifications, the hold in force, and the sales.
type HoldTimeline struct {
	ComicID string `json:"comic_id"`
	Gen     int64  `json:"gen"`
	// Hold is the hold in force; nil when anyone may buy.
	Hold  *Hold  `json:"hold,omitempty"`
	Waves []Wave `json:"waves"`
	Sales []Sale `json:"sales"`
}

// Hold is a hold in force: only the holders of Wave may buy until EndsAt.
type Hold struct {
	Wave          int       `json:"wave"`
	EndsAt        time.Time `json:"ends_at"`
	WindowSeconds int64     `json:"window_seconds"`
}

// Wave is one wave of holders: Subscriptions told at ToldAt, and the
// notifications sent to them (one per email).
type Wave struct {
	Wave          int          `json:"wave"`
	ToldAt        time.Time    `json:"told_at"`
	Subscriptions int          `json:"subscriptions"`
	Notifications []WaveNotice `json:"notifications"`
}

// WaveNotice is a notification of a wave, sent At on Channel.
type WaveNotice struct {
	SubscriptionID string    `json:"subscription_id"`
	Channel        string    `json:"channel"`
	At             time.Time `json:"at"`
}

// Timeline returns the timeline of comic id's latest listing; the error
// wraps ErrNotFound for a comic never listed.
func (s *Flow) Timeline(ctx context.Context, id string) (HoldTimeline, error) {
	tag := s.topics.tag(id)
	pipe := s.Holds.rdb.Pipeline()
	genCmd := pipe.Get(ctx, genKey(tag, id))
	invGen := pipe.HGet(ctx, inventoryKey(tag, id), "gen")
	holdCmd := pipe.HGetAll(ctx, holdKey(tag, id))
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return HoldTimeline{}, fmt.Errorf("comic: timeline of %s: %w", id, err)
	}
	tl := HoldTimeline{ComicID: id, Waves: []Wave{}, Sales: []Sale{}}
	tl.Gen, _ = strconv.ParseInt(genCmd.Val(), 10, 64)
	if tl.Gen == 0 {
		return HoldTimeline{}, fmt.Errorf("%w: comic %s never listed", ErrNotFound, clipName(id))
	}
	h := holdCmd.Val()
	if h["gen"] == genCmd.Val() {
		window, _ := strconv.ParseInt(h["window"], 10, 64)
		wave, _ := strconv.Atoi(h["wave"])
		ends, _ := strconv.ParseInt(h["ends"], 10, 64)
		if invGen.Val() == h["gen"] && ends > s.Holds.now().UnixMilli() {
			tl.Hold = &Hold{Wave: wave, EndsAt: time.UnixMilli(ends).UTC(), WindowSeconds: window / 1000}
		}
		for w := 1; w <= wave; w++ {
			at, n, _ := strings.Cut(h["w"+strconv.Itoa(w)], ",")
			ms, _ := strconv.ParseInt(at, 10, 64)
			count, _ := strconv.Atoi(n)
			tl.Waves = append(tl.Waves, Wave{Wave: w, ToldAt: time.UnixMilli(ms).UTC(), Subscriptions: count, Notifications: []WaveNotice{}})
		}
	}
	hist, err := s.Delivery.History(ctx, id)
	if err != nil {
		return HoldTimeline{}, err
	}
	for _, n := range hist {
		if n.Gen == tl.Gen && n.Wave >= 1 && n.Wave <= len(tl.Waves) {
			w := &tl.Waves[n.Wave-1]
			w.Notifications = append(w.Notifications, WaveNotice{SubscriptionID: n.SubscriptionID, Channel: n.Channel, At: time.UnixMilli(n.AtMs).UTC()})
		}
	}
	for _, w := range tl.Waves {
		slices.SortFunc(w.Notifications, func(a, b WaveNotice) int {
			return cmp.Or(a.At.Compare(b.At), strings.Compare(a.SubscriptionID, b.SubscriptionID))
		})
	}
	if s.Sales != nil {
		sales, err := s.Sales.Sales(ctx, id)
		if err != nil {
			return HoldTimeline{}, err
		}
		tl.Sales = append(tl.Sales, sales...)
	}
	return tl, nil
}
