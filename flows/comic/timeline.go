package comic

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

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
