package writer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/redis/go-redis/v9"
	gotel "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/stream"
)

// Analytics appends transitions, sessions and runs to ClickHouse: the stages
// "avail-analytics-transitions" and "avail-analytics-runs", each its own
// consumer group, independent of the projection. A message is acknowledged
// only once its rows are in ClickHouse (see AnalyticsConfig for batching and
// outages). Sessions are derived from raw transitions: a raw open writes the
// session's open row (version 1), a raw close its closed row (version 2, with
// closed_at and duration); opens and closes are paired through the Redis hash
// ds:{avail.p}:analytics:events, in whatever order they are processed.
//
// NewAnalytics starts one flush loop per stage; call Close when the stages'
// runners have stopped. It is safe for concurrent use.
type Analytics struct {
	rdb         redis.UniversalClient
	ch          *clickhouse.Client
	cfg         AnalyticsConfig
	topics      avail.Topics
	met         *analyticsMetrics
	reg         metric.Registration
	transitions *batcher[transitionItem]
	runs        *batcher[clickhouse.RunRow]
}

// transitionItem is what one transition message writes.
type transitionItem struct {
	transition clickhouse.TransitionRow
	session    *clickhouse.SessionRow
}

// NewAnalytics validates cfg (after defaults) and starts the flush loops.
// tel provides metrics, traces (a span per flush, linked to the messages'
// spans) and the logger; nil fields take the OpenTelemetry globals and
// slog.Default.
func NewAnalytics(rdb redis.UniversalClient, ch *clickhouse.Client, cfg AnalyticsConfig, tel stream.Telemetry) (*Analytics, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if rdb == nil || ch == nil {
		return nil, errors.New("writer: analytics needs a Redis and a ClickHouse client")
	}
	met, err := newAnalyticsMetrics(tel.MeterProvider)
	if err != nil {
		return nil, err
	}
	tp, log := tel.TracerProvider, tel.Logger
	if tp == nil {
		tp = gotel.GetTracerProvider()
	}
	if log == nil {
		log = slog.Default()
	}
	tracer := tp.Tracer(instrumentationScope)
	a := &Analytics{rdb: rdb, ch: ch, cfg: cfg, topics: avail.NewTopics(cfg.Partitions), met: met}
	a.transitions = newBatcher(StageAnalyticsTransitions, cfg, met, log, tracer, a.flushTransitions)
	a.runs = newBatcher(StageAnalyticsRuns, cfg, met, log, tracer, a.flushRuns)
	if a.reg, err = met.observeBuffered(a.transitions, a.runs); err != nil {
		a.transitions.close()
		a.runs.close()
		return nil, err
	}
	return a, nil
}

// Stages returns the two stages: "avail-analytics-transitions" over the
// transition topic and "avail-analytics-runs" over the run topic.
func (a *Analytics) Stages() []stream.Stage {
	return []stream.Stage{
		{Name: StageAnalyticsTransitions, Topic: a.topics.Transitions, Handler: a.HandleTransition, Config: a.cfg.Runner},
		{Name: StageAnalyticsRuns, Topic: a.topics.Runs, Handler: a.HandleRun, Config: a.cfg.Runner},
	}
}

// Close stops the flush loops after the flush in progress. Handlers still
// waiting, and later ones, fail with ErrClosed; their messages stay pending.
func (a *Analytics) Close() error {
	a.transitions.close()
	a.runs.close()
	if err := a.reg.Unregister(); err != nil {
		return fmt.Errorf("writer: analytics close: %w", err)
	}
	return nil
}

// HandleTransition is the handler of "avail-analytics-transitions": it
// writes the transition's row (and, for a raw open or close, its session's
// row) and returns once they are in ClickHouse.
func (a *Analytics) HandleTransition(ctx context.Context, m *stream.Message) error {
	t, err := decodeTransition(m)
	if err != nil {
		return err
	}
	e := entityOf(t.Entity)
	traceID := t.TraceID
	if traceID == "" {
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			traceID = sc.TraceID().String()
		}
	}
	item := transitionItem{transition: clickhouse.TransitionRow{
		EventID: t.EventID, RunID: t.RunID, RunAt: t.RunAt, Kind: t.Kind, Raw: isRaw(t), Stable: t.Stable,
		Baseline: t.Baseline, Notify: t.Notify, EntityKey: e.Key, EntityKind: e.Kind,
		Provider: e.Provider, Venue: e.Venue, VenueName: e.VenueName, Date: e.Date, SlotTime: e.Time,
		PartySize: clampU16(e.PartySize), ScopeKey: t.ScopeKey, SourceID: t.SourceID,
		LastSeen: t.LastSeen, TraceID: traceID,
	}}
	if item.transition.EventID == "" {
		item.transition.EventID = avail.EventID(t.RunID, e.Key, t.Kind, t.Stable)
	}
	if isRaw(t) {
		if item.session, err = a.session(ctx, m.Partition, item.transition); err != nil {
			return err
		}
	}
	rows := 1
	if item.session != nil {
		rows = 2
	}
	return a.transitions.add(ctx, item, rows)
}

// HandleRun is the handler of "avail-analytics-runs": it writes the run's
// row and returns once it is in ClickHouse.
func (a *Analytics) HandleRun(ctx context.Context, m *stream.Message) error {
	var r avail.RunRecord
	if err := json.Unmarshal(m.Payload, &r); err != nil {
		return stream.Permanentf("writer: decode run %s: %w", m.ID, err)
	}
	if r.RunID == "" || r.RunAt.IsZero() {
		return stream.Permanentf("writer: run %s: run id or run_at missing", m.ID)
	}
	traceID := r.TraceID
	if traceID == "" {
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			traceID = sc.TraceID().String()
		}
	}
	row := clickhouse.RunRow{RunID: r.RunID, SourceID: r.SourceID, Provider: r.Provider, ScopeKey: r.ScopeKey,
		StartedAt: r.StartedAt, RunAt: r.RunAt, Status: r.Status, Error: r.Error,
		Observed: clampU32(r.Observed), Opened: clampU32(r.Opened), Closed: clampU32(r.Closed),
		Applied: r.Applied, TraceID: traceID}
	return a.runs.add(ctx, row, 1)
}

func (a *Analytics) flushTransitions(ctx context.Context, items []transitionItem) error {
	trs := make([]clickhouse.TransitionRow, 0, len(items))
	var sess []clickhouse.SessionRow
	for _, it := range items {
		trs = append(trs, it.transition)
		if it.session != nil {
			sess = append(sess, *it.session)
		}
	}
	// The two inserts go out together: a flush costs one round of latency.
	var sessErr error
	var wg sync.WaitGroup
	wg.Go(func() { sessErr = clickhouse.InsertSessions(ctx, a.ch, sess) })
	trErr := clickhouse.InsertTransitions(ctx, a.ch, trs)
	wg.Wait()
	if trErr == nil {
		a.countRows(clickhouse.TableTransitions, len(trs))
	}
	if sessErr == nil {
		a.countRows(clickhouse.TableSessions, len(sess))
	}
	return errors.Join(trErr, sessErr)
}

func (a *Analytics) flushRuns(ctx context.Context, rows []clickhouse.RunRow) error {
	if err := clickhouse.InsertRuns(ctx, a.ch, rows); err != nil {
		return err
	}
	a.countRows(clickhouse.TableRuns, len(rows))
	return nil
}

func (a *Analytics) countRows(table string, n int) {
	if n > 0 {
		a.met.rows.Add(context.Background(), int64(n), metric.WithAttributes(keyTable.String(table)))
	}
}

func clampU16(n int) uint16 { return uint16(min(max(n, 0), 1<<16-1)) }
func clampU32(n int) uint32 { return uint32(min(max(n, 0), 1<<32-1)) }
