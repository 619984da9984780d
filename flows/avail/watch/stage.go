package watch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/avail/availjson"
	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/stream"
)

// StageNotifier is the watcher stage's name, and its consumer group.
const StageNotifier = "avail-notifier"

// NewStage returns the "avail-notifier" stage on topics.Transitions: it
// records raw flips and notifies the watchers matching a stable open once
// per window. Bad messages are dead-lettered; a retryable failure retries
// the message, skipping watchers already served. Nil fields of tel default
// to the OpenTelemetry globals and slog.Default.
func NewStage(rdb redis.UniversalClient, topics avail.Topics, store *Store, channels map[string]notifier.Channel, cfg Config, tel stream.Telemetry) (stream.Stage, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return stream.Stage{}, err
	}
	if rdb == nil || store == nil {
		return stream.Stage{}, errors.New("notifier: stage needs a Redis client and a watcher store")
	}
	if err := topics.Transitions.Validate(); err != nil {
		return stream.Stage{}, fmt.Errorf("notifier: %w", err)
	}
	ledger, err := notifier.NewDeliveryLedger(rdb, cfg.Ledger)
	if err != nil {
		return stream.Stage{}, err
	}
	dispatch, err := notifier.NewDispatcher(ledger, channels, tel)
	if err != nil {
		return stream.Stage{}, err
	}
	tel = tel.WithDefaults()
	unresolved, err := newUnresolved(tel.MeterProvider)
	if err != nil {
		return stream.Stage{}, err
	}
	h := &handler{cfg: cfg, topic: topics.Transitions, store: store, dispatch: dispatch, logger: tel.Logger, unresolved: unresolved,
		windows: &windows{rdb: rdb, topic: topics.Transitions, ttl: cfg.WindowTTL, max: cfg.MaxWindowFlips}}
	return stream.Stage{Name: StageNotifier, Topic: topics.Transitions, Handler: h.handle, Config: cfg.Runner}, nil
}

// handler is the notifier stage's message handler.
type handler struct {
	cfg      Config
	topic    stream.Topic
	store    *Store
	dispatch *notifier.Dispatcher
	// unresolved counts MetricUnresolvedSessions.
	unresolved metric.Int64Counter
	windows    *windows
	logger     *slog.Logger
}

func (h *handler) handle(ctx context.Context, m *stream.Message) error {
	if m.Type != avail.TypeTransition && m.Type != avail.TypeTransitions {
		return stream.Permanentf("notifier: message %s has type %q, want %q or %q", m.ID, clip.Marked(m.Type, maxQuoted),
			avail.TypeTransition, avail.TypeTransitions)
	}
	if len(m.Payload) > h.cfg.MaxPayloadBytes {
		return stream.Permanentf("notifier: transition message %s of %d bytes exceeds %d", m.ID, len(m.Payload), h.cfg.MaxPayloadBytes)
	}
	ts, err := availjson.DecodeTransitions(m.Type, m.Payload)
	if err != nil {
		return stream.Permanentf("notifier: decode transitions %s: %w", m.ID, err)
	}
	for i, t := range ts {
		if err := checkTransition(t); err != nil {
			return stream.Permanent(fmt.Errorf("notifier: transition %d of %s: %w", i, m.ID, err))
		}
	}
	if len(ts) == 1 {
		return h.handleOne(ctx, m, ts[0])
	}
	errs := make([]error, len(ts))
	for i, t := range ts {
		errs[i] = h.handleOne(ctx, m, t)
	}
	return notifier.Settle(errs)
}

// handleOne handles one transition of message m.
func (h *handler) handleOne(ctx context.Context, m *stream.Message, t avail.Transition) error {
	if t.Entity.Kind == avail.EntitySource {
		if !t.Stable || !t.Notify {
			return nil
		}
		return h.sourceHealth(ctx, m, t)
	}
	if t.Raw || !t.Stable {
		if err := h.windows.record(ctx, m.Partition, t.Entity.Key, t.Kind, t.RunID, t.RunAt); err != nil {
			return err
		}
	}
	switch {
	case t.Raw && !t.Stable && t.Kind == avail.KindOpen && !t.Baseline:
		return h.provisional(ctx, m, t)
	case t.Raw && !t.Stable && t.Kind == avail.KindClose:
		return h.retract(ctx, m, t)
	case !t.Stable || !t.Notify:
		return nil
	case t.Kind == avail.KindOpen:
		return h.notify(ctx, m, t)
	}
	return h.gone(ctx, m, t)
}

// checkTransition reports why a transition cannot be handled.
func checkTransition(t avail.Transition) error {
	switch {
	case t.Entity.Key == "" || len(t.Entity.Key) > maxSlotLen || clip.HasControl(t.Entity.Key):
		return fmt.Errorf("entity key: want 1-%d bytes without control characters", maxSlotLen)
	case t.RunID == "" || len(t.RunID) > avail.MaxIDLen || clip.HasControl(t.RunID):
		return fmt.Errorf("run id: want 1-%d bytes without control characters", avail.MaxIDLen)
	case t.Kind != avail.KindOpen && t.Kind != avail.KindClose:
		return fmt.Errorf("kind %q: want open or close", clip.Marked(t.Kind, maxQuoted))
	case t.RunAt.IsZero():
		return errors.New("run_at is missing")
	case len(t.TraceID) > 64 || len(t.EventID) > 64:
		return errors.New("trace id or event id longer than 64 bytes")
	}
	return nil
}

// blockRetryAfter blocks a watcher's destination for the Retry-After its
// receiver answered with err, if any.
func (h *handler) blockRetryAfter(ctx context.Context, del notifier.Delivery, err error) {
	var de *notifier.DeliveryError
	if h.cfg.Throttle != nil && errors.As(err, &de) && de.RetryAfter > 0 {
		if berr := h.cfg.Throttle.Block(ctx, del.Notification.Recipient.ID, time.Now().Add(de.RetryAfter)); berr != nil {
			h.logger.WarnContext(ctx, "notifier: retry-after not recorded", "error", berr)
		}
	}
}

// MetricUnresolvedSessions counts stable opens notified without a session
// id. Int64Counter, unit {transition}.
const MetricUnresolvedSessions = "dropstream.notifier.sessions.unresolved"

// instrumentationScope is the meter of the stage's own metric: the
// notifier's, where the metric has always been reported.
const instrumentationScope = "github.com/dropstream/dropstream/notifier"

func newUnresolved(mp metric.MeterProvider) (metric.Int64Counter, error) {
	c, err := mp.Meter(instrumentationScope).Int64Counter(MetricUnresolvedSessions,
		metric.WithDescription("Stable opens notified without a session id: the raw open of their window was not seen."),
		metric.WithUnit("{transition}"))
	if err != nil {
		return nil, fmt.Errorf("notifier: metrics: %w", err)
	}
	return c, nil
}

// windows keeps each entity's recent raw flips (sorted by run_at, then run
// id), so a stable open can be given its window's session id.
type windows struct {
	rdb   redis.UniversalClient
	topic stream.Topic
	ttl   time.Duration
	max   int
}

const memberSep = "\x00"

// record adds a raw flip of an entity, keeps the newest w.max flips and
// renews the set's expiry.
func (w *windows) record(ctx context.Context, partition int, entityKey, kind, runID string, runAt time.Time) error {
	key := eventsKey(w.topic, partition, entityKey)
	_, err := w.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.ZAdd(ctx, key, redis.Z{Score: float64(runAt.UnixMilli()), Member: runID + memberSep + kind})
		pipe.ZRemRangeByRank(ctx, key, 0, int64(-w.max-1))
		pipe.PExpire(ctx, key, w.ttl)
		return nil
	})
	if err != nil {
		return fmt.Errorf("notifier: record %s of %s: %w", kind, clip.Marked(entityKey, maxQuoted), err)
	}
	return nil
}

// window is what the remembered flips tell of the open window a stable
// open confirms.
type window struct {
	// Session is avail.SessionID(entity key, run id of the raw open that
	// began the window); OK false when that open is not remembered.
	Session string
	OK      bool
	// OpenedAt is the raw open's run_at (zero when not OK).
	OpenedAt time.Time
	// ClosedFor is how long the entity was closed before that raw open;
	// Reopened is false when no earlier close is remembered.
	ClosedFor time.Duration
	Reopened  bool
}

// window returns the open window a stable open of run (runAt, runID)
// confirms, and the raw close before it.
func (w *windows) window(ctx context.Context, partition int, entityKey, runID string, runAt time.Time) (window, error) {
	ms := runAt.UnixMilli()
	zs, err := w.rdb.ZRevRangeByScoreWithScores(ctx, eventsKey(w.topic, partition, entityKey), &redis.ZRangeBy{
		Max: fmt.Sprint(ms), Min: "-inf", Count: int64(w.max)}).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return window{}, fmt.Errorf("notifier: session of %s: %w", clip.Marked(entityKey, maxQuoted), err)
	}
	var out window
	for _, z := range zs {
		member, _ := z.Member.(string)
		run, kind, found := strings.Cut(member, memberSep)
		if !found || int64(z.Score) == ms && run > runID {
			continue // a later run of the same millisecond
		}
		at := time.UnixMilli(int64(z.Score)).UTC()
		if !out.OK {
			if kind != avail.KindOpen {
				return window{}, nil
			}
			out.Session, out.OK, out.OpenedAt = avail.SessionID(entityKey, run), true, at
			continue
		}
		if kind == avail.KindClose {
			out.ClosedFor, out.Reopened = out.OpenedAt.Sub(at), true
		}
		break
	}
	return out, nil
}
