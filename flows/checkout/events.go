package checkout

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/internal/tenancy"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer/sink"
)

// events lists the newest finished attempts in the sagas stream
// (Description.Events).
func (s *Flow) events(ctx context.Context, v tenancy.View, limit int) ([]flow.Event, error) {
	sagas, err := flow.Recent(ctx, s.rdb, s.topics.Sagas, flow.ScanFor(v, limit))
	if err != nil {
		return nil, err
	}
	var out []flow.Event
	for _, e := range sagas {
		var sg Saga
		if e.Type != TypeSaga || json.Unmarshal(e.Payload, &sg) != nil || !Sees(v, sg.OrderID) {
			continue
		}
		summary := fmt.Sprintf("%s, total %d", sg.Status, sg.TotalCost)
		if sg.Reason != "" {
			summary += ": " + sg.Reason
		}
		if sg.Compensated > 0 {
			summary += fmt.Sprintf(" (%d parts undone)", sg.Compensated)
		}
		at := e.Time()
		if sg.FinishedMs > 0 {
			at = time.UnixMilli(sg.FinishedMs)
		}
		out = append(out, flow.Event{Kind: "checkout", ID: attemptKey(sg.OrderID, sg.TrNum), Time: at,
			Subject: "order " + sg.OrderID + " by user " + sg.UserID, Summary: summary,
			Cause: []flow.Ref{{Kind: "order", ID: sg.OrderID}}, TraceID: flow.TraceIDOf(sg.TraceParent),
			Steps: sagaSteps(sg.Steps)})
		if len(out) == limit {
			break
		}
	}
	return out, nil
}

// attemptKey names one attempt of an order.
func attemptKey(orderID string, tr int64) string { return orderID + "#" + strconv.FormatInt(tr, 10) }

// sagaSteps lists the parts' answers, then their compensations.
func sagaSteps(steps []SagaStep) []flow.Step {
	var out, undo []flow.Step
	for _, st := range steps {
		out = append(out, flow.Step{Name: st.Part, OK: st.Result == "ok", Result: st.Result})
		if st.Undo != "" {
			undo = append(undo, flow.Step{Name: "undo " + st.Part, OK: st.Undo == "ok" || st.Undo == "noop", Result: st.Undo})
		}
	}
	return append(out, undo...)
}

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
