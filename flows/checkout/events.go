package checkout

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/dropstream/dropstream/flow"
)

// outcomesPerSaga is how many outcome entries events reads per saga asked
// for, to find the sagas' steps.
const outcomesPerSaga = 8

// events lists the newest finished checkout attempts still in the sagas
// stream, newest first, with the steps the outcomes stream still holds:
// the flow's Description.Events.
func (s *Flow) events(ctx context.Context, limit int) ([]flow.Event, error) {
	sagas, err := flow.Recent(ctx, s.rdb, s.topics.Sagas, limit)
	if err != nil {
		return nil, err
	}
	outcomes, err := flow.Recent(ctx, s.rdb, s.topics.Outcomes, limit*outcomesPerSaga)
	if err != nil {
		return nil, err
	}
	steps := map[string][]flow.Step{}
	// Outcomes are newest first: prepend to keep each attempt's in order.
	for _, e := range outcomes {
		var o Outcome
		if e.Type != TypeOutcome || json.Unmarshal(e.Payload, &o) != nil || o.Part == "" {
			continue
		}
		name := o.Part
		if o.Rollback {
			name = "undo " + o.Part
		}
		k := attemptKey(o.OrderID, o.TrNum)
		steps[k] = append([]flow.Step{{Name: name, OK: o.OK, Result: o.Result}}, steps[k]...)
	}
	var out []flow.Event
	for _, e := range sagas {
		var sg Saga
		if e.Type != TypeSaga || json.Unmarshal(e.Payload, &sg) != nil {
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
			Steps: steps[attemptKey(sg.OrderID, sg.TrNum)]})
	}
	return out, nil
}

// attemptKey names one attempt of an order.
func attemptKey(orderID string, tr int64) string { return orderID + "#" + strconv.FormatInt(tr, 10) }
