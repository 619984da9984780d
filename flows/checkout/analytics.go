package checkout

import (
	"encoding/json"
	"time"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer/sink"
)

// HistoryConfig configures the "checkout-analytics" stage, appending saga
// records to checkout_sagas; rows collapse by (order_id, tr_num).
func (s *Flow) HistoryConfig() sink.HistoryConfig[clickhouse.CheckoutSagaRow] {
	return sink.HistoryConfig[clickhouse.CheckoutSagaRow]{Stage: StageHistory, Topic: s.topics.Sagas,
		Tables: []string{clickhouse.TableCheckoutSagas},
		Rows:   sagaRows, Insert: clickhouse.InsertCheckoutSagas, Runner: s.cfg.Stage}
}

// sagaRows turns a saga record into its row; malformed is stream.Permanent.
func sagaRows(m *stream.Message) ([]clickhouse.CheckoutSagaRow, error) {
	if m.Type != TypeSaga {
		return nil, stream.Permanentf("checkout: message type %q, want %q", m.Type, TypeSaga)
	}
	var r Saga
	if err := json.Unmarshal(m.Payload, &r); err != nil || !ValidID(r.OrderID) || r.TrNum < 1 || r.TrNum > 1<<32-1 {
		return nil, stream.Permanentf("checkout: malformed saga record %q: %v", m.Payload, err)
	}
	return []clickhouse.CheckoutSagaRow{{OrderID: r.OrderID, TrNum: uint32(r.TrNum), UserID: r.UserID, Status: r.Status,
		Reason: r.Reason, TotalCost: r.TotalCost, Parts: uint16(min(max(r.Parts, 0), 1<<16-1)),
		Compensated: uint16(min(max(r.Compensated, 0), 1<<16-1)),
		StartedAt:   time.UnixMilli(r.StartedMs), FinishedAt: time.UnixMilli(r.FinishedMs),
		Decide: time.Duration(max(r.DecidedMs-r.StartedMs, 0)) * time.Millisecond, Duration: time.Duration(max(r.FinishedMs-r.StartedMs, 0)) * time.Millisecond,
		TraceID: flow.TraceIDOf(r.TraceParent)}}, nil
}
