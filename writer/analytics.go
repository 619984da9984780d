package writer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/avail/availjson"
	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer/sink"
)

// Analytics appends transitions, sessions and runs to ClickHouse through
// the batch stages "avail-analytics-transitions" and
// "avail-analytics-runs", acknowledging a batch once its rows are written.
// Session rows collapse in any order. Close it after the runners stop.
type Analytics struct {
	ch     *clickhouse.Client
	cfg    AnalyticsConfig
	topics avail.Topics
	met    *sink.Metrics
	// unmatched counts MetricUnmatchedCloses.
	unmatched metric.Int64Counter
	reg       metric.Registration
	// Each stage's copies share its batcher.
	transitions *sink.Batcher[transitionBatch]
	runs        *sink.History[clickhouse.RunRow]
	closed      atomic.Bool
}

// transitionBatch is what one batch of transition messages writes.
type transitionBatch struct {
	transitions []clickhouse.TransitionRow
	sessions    []clickhouse.SessionRow
	// runs are the records of the runs whose transitions the batch holds
	// (avail.TypeTransitions carries them instead of the run topic).
	runs []clickhouse.RunRow
}

// NewAnalytics validates cfg (after defaults) and starts the flush loops,
// reporting through tel (nil fields: the globals).
func NewAnalytics(ch *clickhouse.Client, cfg AnalyticsConfig, tel stream.Telemetry) (*Analytics, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if ch == nil {
		return nil, errors.New("writer: analytics needs a ClickHouse client")
	}
	met, tracer, log, err := sink.Instruments(tel)
	if err != nil {
		return nil, err
	}
	unmatched, err := tel.WithDefaults().MeterProvider.Meter(instrumentationScope).Int64Counter(MetricUnmatchedCloses,
		metric.WithDescription("Raw closes with no known open: no session row."), metric.WithUnit("{transition}"))
	if err != nil {
		return nil, fmt.Errorf("writer: analytics metrics: %w", err)
	}
	a := &Analytics{ch: ch, cfg: cfg, topics: avail.NewTopics(cfg.Partitions), met: met, unmatched: unmatched}
	a.runs, err = sink.NewHistory(ch, sink.HistoryConfig[clickhouse.RunRow]{Stage: StageAnalyticsRuns, Topic: a.topics.Runs,
		Tables: []string{clickhouse.TableRuns}, Rows: runRows, Insert: insertRuns,
		Batching: cfg.Batching, ReadAhead: cfg.ReadAhead, Runner: cfg.Runner}, tel)
	if err != nil {
		return nil, err
	}
	a.transitions = sink.NewBatcher(StageAnalyticsTransitions, cfg.Batching, met, log, tracer, a.flushTransitions)
	if a.reg, err = met.Observe(a.transitions); err != nil {
		_ = a.closeBatchers()
		return nil, err
	}
	return a, nil
}

// Stages returns AnalyticsConfig.ReadAhead copies of each batch stage
// (sink.Copies).
func (a *Analytics) Stages() []stream.Stage {
	tcfg := a.cfg.Runner
	tcfg.BatchSize = a.cfg.TransitionsBatchSize
	return sink.Copies(a.cfg.ReadAhead,
		stream.Stage{Name: StageAnalyticsTransitions, Topic: a.topics.Transitions, Config: tcfg, BatchHandler: a.HandleTransitions},
		a.runs.Stage())
}

// Close stops the flush loops after the flush in progress; waiting and
// later handlers fail with sink.ErrClosed. It is idempotent.
func (a *Analytics) Close() error {
	if !a.closed.CompareAndSwap(false, true) {
		return nil
	}
	if err := errors.Join(a.closeBatchers(), a.reg.Unregister()); err != nil {
		return fmt.Errorf("writer: analytics close: %w", err)
	}
	return nil
}

// HandleTransitions is the "avail-analytics-transitions" batch handler: it
// returns nil once the rows are in ClickHouse.
func (a *Analytics) HandleTransitions(ctx context.Context, msgs []*stream.Message) error {
	b, errs := a.prepareTransitions(msgs)
	var err error
	if len(b.transitions) > 0 {
		err = a.transitions.Add(ctx, b, len(b.transitions)+len(b.sessions)+len(b.runs), len(msgs), sink.Urgent(msgs, a.cfg.TransitionsBatchSize))
	}
	return sink.Settle(errs, err)
}

// prepareTransitions decodes msgs into rows; errs holds each message's
// permanent error.
func (a *Analytics) prepareTransitions(msgs []*stream.Message) (transitionBatch, []error) {
	a.transitions.Begin()
	defer a.transitions.End()
	errs := make([]error, len(msgs))
	b := transitionBatch{transitions: make([]clickhouse.TransitionRow, 0, 4*len(msgs)),
		sessions: make([]clickhouse.SessionRow, 0, 2*len(msgs))}
	unmatched := 0
	for i, m := range msgs {
		run, ts, err := decodeRunTransitions(m)
		if err != nil {
			errs[i] = err
			continue
		}
		if run != nil {
			b.runs = append(b.runs, runRowOf(m, *run))
		}
		for _, t := range ts {
			row := transitionRow(m, t)
			b.transitions = append(b.transitions, row)
			if !row.Raw {
				continue
			}
			if s, ok := sessionRow(&row, t); ok {
				b.sessions = append(b.sessions, s)
			} else {
				unmatched++
			}
		}
	}
	if unmatched > 0 {
		a.unmatched.Add(context.Background(), int64(unmatched))
	}
	return b, errs
}

// flushTransitions inserts the batches' rows, one INSERT per table, all at
// once.
func (a *Analytics) flushTransitions(ctx context.Context, batches []transitionBatch) error {
	trs := make([][]clickhouse.TransitionRow, len(batches))
	sess := make([][]clickhouse.SessionRow, len(batches))
	runs := make([][]clickhouse.RunRow, len(batches))
	for i, b := range batches {
		trs[i], sess[i], runs[i] = b.transitions, b.sessions, b.runs
	}
	var sessErr, runErr error
	var wg sync.WaitGroup
	wg.Go(func() { sessErr = clickhouse.InsertSessions(ctx, a.ch, sess...) })
	if clickhouse.RowCount(runs) > 0 {
		wg.Go(func() { runErr = clickhouse.InsertRuns(ctx, a.ch, runs...) })
	}
	trErr := clickhouse.InsertTransitions(ctx, a.ch, trs...)
	wg.Wait()
	if trErr == nil {
		a.met.CountRows(clickhouse.TableTransitions, clickhouse.RowCount(trs))
	}
	if sessErr == nil {
		a.met.CountRows(clickhouse.TableSessions, clickhouse.RowCount(sess))
	}
	if runErr == nil {
		a.met.CountRows(clickhouse.TableRuns, clickhouse.RowCount(runs))
	}
	return errors.Join(trErr, sessErr, runErr)
}

// insertRuns inserts the runs in one INSERT.
func insertRuns(ctx context.Context, ch *clickhouse.Client, rows []clickhouse.RunRow) error {
	return clickhouse.InsertRuns(ctx, ch, rows)
}

// transitionRow returns the row of transition t, decoded from m.
func transitionRow(m *stream.Message, t avail.Transition) clickhouse.TransitionRow {
	e := entityOf(t.Entity)
	row := clickhouse.TransitionRow{
		EventID: t.EventID, RunID: t.RunID, RunAt: t.RunAt, Kind: t.Kind, Raw: isRaw(t), Stable: t.Stable,
		Baseline: t.Baseline, Notify: t.Notify, EntityKey: e.Key, EntityKind: e.Kind,
		Provider: e.Provider, Venue: e.Venue, VenueName: e.VenueName, Date: e.Date, SlotTime: e.Time,
		PartySize: clampU16(e.PartySize), ScopeKey: t.ScopeKey, SourceID: t.SourceID,
		LastSeen: t.LastSeen, TraceID: traceIDOf(m, t.TraceID),
	}
	if row.EventID == "" {
		row.EventID = avail.EventID(t.RunID, e.Key, t.Kind, t.Stable)
	}
	return row
}

// sessionRow returns the session row raw transition t writes, or false for
// a close whose opening the diff did not know. Times are whole ms.
func sessionRow(r *clickhouse.TransitionRow, t avail.Transition) (clickhouse.SessionRow, bool) {
	s := clickhouse.SessionRow{EntityKey: r.EntityKey, EntityKind: r.EntityKind, Provider: r.Provider,
		Venue: r.Venue, VenueName: r.VenueName, Date: r.Date, SlotTime: r.SlotTime, PartySize: r.PartySize,
		ScopeKey: r.ScopeKey, SourceID: r.SourceID, TraceID: r.TraceID}
	own := time.UnixMilli(r.RunAt.UnixMilli()).UTC()
	if r.Kind == avail.KindOpen {
		s.OpenRunID, s.OpenedAt = r.RunID, own
	} else {
		if t.OpenRunID == "" {
			return clickhouse.SessionRow{}, false
		}
		s.OpenRunID, s.OpenedAt = t.OpenRunID, time.UnixMilli(t.OpenedAtMS).UTC()
		s.Closed, s.CloseRunID, s.ClosedAt = true, r.RunID, own
		s.Duration = max(s.ClosedAt.Sub(s.OpenedAt), 0)
	}
	s.SessionID = avail.SessionID(r.EntityKey, s.OpenRunID)
	return s, true
}

// runRows decodes a run message into its one row.
func runRows(m *stream.Message) ([]clickhouse.RunRow, error) {
	var r avail.RunRecord
	if err := availjson.UnmarshalRunRecord(m.Payload, &r); err != nil {
		return nil, stream.Permanentf("writer: decode run %s: %w", m.ID, err)
	}
	if err := checkRun(m, r); err != nil {
		return nil, err
	}
	return []clickhouse.RunRow{runRowOf(m, r)}, nil
}

// checkRun returns the permanent error of a run record, decoded from m,
// that lacks its run id or run_at.
func checkRun(m *stream.Message, r avail.RunRecord) error {
	if r.RunID == "" || r.RunAt.IsZero() {
		return stream.Permanentf("writer: run of %s: run id or run_at missing", m.ID)
	}
	return nil
}

// runRowOf returns the row of run record r, decoded from m.
func runRowOf(m *stream.Message, r avail.RunRecord) clickhouse.RunRow {
	return clickhouse.RunRow{RunID: r.RunID, SourceID: r.SourceID, Provider: r.Provider, ScopeKey: r.ScopeKey,
		StartedAt: r.StartedAt, RunAt: r.RunAt, Status: r.Status, Error: r.Error,
		Observed: clampU32(r.Observed), Opened: clampU32(r.Opened), Closed: clampU32(r.Closed),
		Applied: r.Applied, TraceID: traceIDOf(m, r.TraceID)}
}

// traceIDOf returns id, or when it is empty the trace id the message was
// published in.
func traceIDOf(m *stream.Message, id string) string {
	if id != "" {
		return id
	}
	if sc := trace.SpanContextFromContext(m.Context()); sc.IsValid() {
		return sc.TraceID().String()
	}
	return ""
}

func clampU16(n int) uint16 { return uint16(min(max(n, 0), 1<<16-1)) }
func clampU32(n int) uint32 { return uint32(min(max(n, 0), 1<<32-1)) }

// closeBatchers closes both stages' batchers, at once.
func (a *Analytics) closeBatchers() error {
	var runsErr error
	var wg sync.WaitGroup
	wg.Go(a.transitions.Close)
	wg.Go(func() { runsErr = a.runs.Close() })
	wg.Wait()
	return runsErr
}

// MetricUnmatchedCloses counts raw closes whose opening the diff did not
// know, so no session row was written. Int64Counter, unit {transition}.
const MetricUnmatchedCloses = "dropstream.writer.sessions.unmatched"

// instrumentationScope names the writer's meter and tracer.
const instrumentationScope = sink.InstrumentationScope
