package checkout

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer/flowhistory"
	"github.com/dropstream/dropstream/writer/sink"
)

// HistoryConfig configures the "checkout-analytics" stage, appending saga
// records to checkout_sagas; rows collapse by (order_id, tr_num).
func (s *Flow) HistoryConfig() sink.HistoryConfig[clickhouse.CheckoutSagaRow] {
	return sink.HistoryConfig[clickhouse.CheckoutSagaRow]{Stage: StageHistory, Topic: s.topics.Sagas,
		Tables: []string{clickhouse.TableCheckoutSagas},
		Rows: func(m *stream.Message) ([]clickhouse.CheckoutSagaRow, error) {
			row, err := SagaRow(m)
			if err != nil {
				return nil, err
			}
			return []clickhouse.CheckoutSagaRow{row}, nil
		},
		Insert: clickhouse.InsertCheckoutSagas, Runner: s.cfg.Stage}
}

// History is the HistoryConfig stage as the Description declares it.
func (s *Flow) History() flow.History {
	return flowhistory.Of(s.HistoryConfig(), stream.Telemetry{Logger: s.log})
}

// SagaRow turns a saga record into its row; malformed is stream.Permanent.
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
