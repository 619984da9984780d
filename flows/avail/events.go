package avail

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/internal/tenancy"
)

// events lists the newest transitions still in the transitions stream,
// newest first, each caused by its run: the flow's Description.Events.
func (f *Flow) events(ctx context.Context, _ tenancy.View, limit int) ([]flow.Event, error) {
	entries, err := flow.Recent(ctx, f.rdb, f.topics.Transitions, limit)
	if err != nil {
		return nil, err
	}
	var out []flow.Event
	for _, e := range entries {
		var ts []avail.Transition
		switch e.Type {
		case avail.TypeTransitions:
			var rt avail.RunTransitions
			if json.Unmarshal(e.Payload, &rt) != nil {
				continue
			}
			ts = rt.Expand()
		case avail.TypeTransition:
			var t avail.Transition
			if json.Unmarshal(e.Payload, &t) != nil {
				continue
			}
			ts = []avail.Transition{t}
		}
		for _, t := range ts {
			out = append(out, transitionEvent(t, e))
			if len(out) == limit {
				return out, nil
			}
		}
	}
	return out, nil
}

// transitionEvent describes one transition as an event.
func transitionEvent(t avail.Transition, e flow.Entry) flow.Event {
	var flags []string
	for _, f := range []struct {
		on   bool
		name string
	}{{t.Raw, "raw"}, {t.Stable, "stable"}, {t.Baseline, "baseline"}, {t.Notify, "notifies"}} {
		if f.on {
			flags = append(flags, f.name)
		}
	}
	subject := t.Entity.Key
	if t.Entity.VenueName != "" {
		subject = t.Entity.VenueName + " " + strings.TrimSpace(t.Entity.Date+" "+t.Entity.Time)
	}
	ev := flow.Event{Kind: "transition", ID: t.EventID, Time: e.Time(), Subject: subject,
		Summary: t.Kind + " (" + strings.Join(flags, ", ") + ")", TraceID: t.TraceID}
	if t.Raw {
		ev.Change = t.Kind
	}
	if ev.TraceID == "" {
		ev.TraceID = flow.TraceIDOf(e.TraceParent)
	}
	if t.RunID != "" {
		ev.Cause = []flow.Ref{{Kind: "run", ID: t.RunID}}
	}
	return ev
}
