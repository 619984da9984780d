package notifier

import (
	"context"
	"encoding/json"

	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/internal/tenancy"
	"github.com/dropstream/dropstream/notifier/history"
)

// events lists the newest notification records in the history stream,
// with their cause (Description.Events).
func (f *Flow) events(ctx context.Context, v tenancy.View, limit int) ([]flow.Event, error) {
	entries, err := flow.Recent(ctx, f.rdb, f.topics.History, flow.ScanFor(v, limit))
	if err != nil {
		return nil, err
	}
	var out []flow.Event
	owners := map[string]string{} // recipient id → tenant, read once per call
	for _, e := range entries {
		var recs []history.Record
		switch e.Type {
		case history.TypeRecords:
			if json.Unmarshal(e.Payload, &recs) != nil {
				continue
			}
		case history.TypeRecord:
			var r history.Record
			if json.Unmarshal(e.Payload, &r) != nil {
				continue
			}
			recs = []history.Record{r}
		}
		// A message's records are in the order they happened: newest last.
		for i := len(recs) - 1; i >= 0; i-- {
			if !v.All {
				owner, ok := owners[recs[i].SubscriberID]
				if !ok {
					if owner, err = f.OwnerOf(ctx, recs[i].SubscriberID); err != nil {
						return nil, err
					}
					owners[recs[i].SubscriberID] = owner
				}
				if !v.Sees(owner) {
					continue
				}
			}
			out = append(out, notificationEvent(recs[i]))
			if len(out) == limit {
				return out, nil
			}
		}
	}
	return out, nil
}

// notificationEvent describes one history record as an event.
func notificationEvent(r history.Record) flow.Event {
	ev := flow.Event{Kind: "notification", ID: r.ID, Time: r.At, Subject: r.SubscriberID + " via " + r.Channel,
		Summary: r.Status + ": " + r.Subject, TraceID: r.TraceID}
	if r.Error != "" {
		ev.Summary += " (" + r.Error + ")"
	}
	if r.EventID != "" {
		ev.Cause = append(ev.Cause, flow.Ref{Kind: r.Flow + " event", ID: r.EventID})
	}
	if r.RunID != "" {
		ev.Cause = append(ev.Cause, flow.Ref{Kind: "run", ID: r.RunID})
	}
	return ev
}
