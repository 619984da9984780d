package checkout

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/stream"
)

// AnalyticsStage returns the "checkout-analytics" stage: it writes the
// saga records of finished attempts to ClickHouse's checkout_sagas table,
// one insert per batch read. A malformed record is dead-lettered; a
// ClickHouse error fails the batch retryably (rows collapse by (order_id,
// tr_num), so a retried batch adds nothing). Without ClickHouse, do not run
// it: create its group (stream.EnsureGroups) so the records wait.
func (s *Flow) AnalyticsStage(ch *clickhouse.Client) stream.Stage {
	cfg := s.cfg.Stage
	return stream.Stage{Name: StageHistory, Topic: s.topics.Sagas, Config: cfg,
		BatchHandler: func(ctx context.Context, msgs []*stream.Message) error {
			errs := make([]error, len(msgs))
			rows := make([]clickhouse.CheckoutSagaRow, 0, len(msgs))
			idx := make([]int, 0, len(msgs))
			for i, m := range msgs {
				row, err := SagaRow(m)
				if err != nil {
					errs[i] = err
					continue
				}
				rows = append(rows, row)
				idx = append(idx, i)
			}
			if err := clickhouse.InsertCheckoutSagas(ctx, ch, rows); err != nil {
				for _, i := range idx {
					errs[i] = err
				}
			}
			return &stream.BatchError{Errs: errs}
		}}
}

// SagaRow turns a saga record message into its ClickHouse row; a malformed
// record is a stream.Permanent error.
func SagaRow(m *stream.Message) (clickhouse.CheckoutSagaRow, error) {
	if m.Type != TypeSaga {
		return clickhouse.CheckoutSagaRow{}, stream.Permanentf("checkout: message type %q, want %q", m.Type, TypeSaga)
	}
	var r Saga
	if err := json.Unmarshal(m.Payload, &r); err != nil || !ValidID(r.OrderID) || r.TrNum < 1 || r.TrNum > 1<<32-1 {
		return clickhouse.CheckoutSagaRow{}, stream.Permanentf("checkout: malformed saga record %q: %v", m.Payload, err)
	}
	traceID := ""
	if p := strings.Split(r.TraceParent, "-"); len(p) == 4 && len(p[1]) == 32 {
		traceID = p[1]
	}
	return clickhouse.CheckoutSagaRow{OrderID: r.OrderID, TrNum: uint32(r.TrNum), UserID: r.UserID, Status: r.Status,
		Reason: r.Reason, TotalCost: r.TotalCost, Parts: uint16(min(max(r.Parts, 0), 1<<16-1)),
		Compensated: uint16(min(max(r.Compensated, 0), 1<<16-1)),
		StartedAt:   time.UnixMilli(r.StartedMs), FinishedAt: time.UnixMilli(r.FinishedMs),
		Decide: time.Duration(max(r.DecidedMs-r.StartedMs, 0)) * time.Millisecond, Duration: time.Duration(max(r.FinishedMs-r.StartedMs, 0)) * time.Millisecond,
		TraceID: traceID}, nil
}
