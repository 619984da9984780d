package watch

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/internal/rediskey"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/history"
	"github.com/dropstream/dropstream/notifier/throttle"
	"github.com/dropstream/dropstream/stream"
)

// The events of watcher notifications (OpenEvent.Event).
const (
	// EventAvailabilityOpen: a stable opening (once per open window, or
	// per Watcher.RearmAfterMinutes).
	EventAvailabilityOpen = "availability.open"
	// EventAvailabilityProvisional: an opening on first sight, before it is
	// confirmed (Watcher.Provisional).
	EventAvailabilityProvisional = "availability.provisional"
	// EventAvailabilityRetracted: a provisional opening closed before it
	// was confirmed; RetractsEventID names the provisional notice.
	EventAvailabilityRetracted = "availability.retracted"
	// EventAvailabilityGone: a told opening closed for good
	// (Watcher.NotifyGone).
	EventAvailabilityGone = "availability.gone"
	// EventSourceDown and EventSourceUp: a source serving the watcher went
	// down or came back; Source tells which and for how long.
	EventSourceDown = "availability.source_down"
	EventSourceUp   = "availability.source_up"
)

// SourceStatus is the source part of a source health notice.
type SourceStatus struct {
	SourceID string `json:"source_id"`
	// Status is "down" or "up".
	Status              string `json:"status"`
	ConsecutiveFailures int    `json:"consecutive_failures,omitempty"`
	// BlindSince is when the source last answered before it went down.
	BlindSince time.Time `json:"blind_since,omitzero"`
	// BlindForSeconds, on "up", is how long it was blind: from
	// BlindSince to the run that brought it back.
	BlindForSeconds int64 `json:"blind_for_seconds,omitempty"`
}

// OpenEvent is the JSON body of every watcher notification. Receivers
// verify the Standard Webhooks headers and dedupe on webhook-id.
type OpenEvent struct {
	// Event is EventAvailabilityOpen.
	Event string `json:"event"`
	// WatcherID is the watcher notified.
	WatcherID string `json:"watcher_id"`
	// Entity is what opened.
	Entity avail.Entity `json:"entity"`
	// RunAt is when the opening was confirmed (the observing run's time).
	RunAt time.Time `json:"run_at"`
	// EventID is the id of the stable open transition:
	// avail.EventID(run id, entity key, "open", true).
	EventID string `json:"event_id"`
	// SessionID is the open window's avail.SessionID; empty when the raw open
	// that began it was not seen.
	SessionID string `json:"session_id"`
	// TraceID is the trace of the run that confirmed the opening.
	TraceID string `json:"trace_id,omitempty"`
	// BlindForSeconds is how long the source was blind before this opening
	// was first seen: it may have begun any time then.
	BlindForSeconds int64 `json:"blind_for_seconds,omitempty"`
	// RetractsEventID, on EventAvailabilityRetracted, is the event id of
	// the provisional notice it retracts.
	RetractsEventID string `json:"retracts_event_id,omitempty"`
	// Source is set on EventSourceDown and EventSourceUp.
	Source *SourceStatus `json:"source,omitempty"`
	// Text is a short human summary ("source was blind for 12 min").
	Text string `json:"text,omitempty"`
}

// outgoing is one notification to one watcher.
type outgoing struct {
	w   Watcher
	key string // business key, after "avail:"
	ev  OpenEvent
}

// send delivers outs as one dispatcher batch, which records each in the
// history, and returns each one's outcome and error.
func (h *handler) send(ctx context.Context, m *stream.Message, runID string, outs []outgoing) ([]string, []error) {
	outcomes, errs := make([]string, len(outs)), make([]error, len(outs))
	dels := make([]notifier.Delivery, 0, len(outs))
	at := make([]int, 0, len(outs)) // index in outs of each delivery
	for i, o := range outs {
		body, err := json.Marshal(o.ev)
		if err != nil {
			errs[i] = stream.Permanent(fmt.Errorf("notifier: encode event for %s: %w", o.w.ID, err))
			continue
		}
		del := notifier.Delivery{HashTag: h.topic.HashTag(m.Partition), Key: avail.Flow + ":" + o.key,
			Channel: o.w.Channel, MessageID: m.ID, Attempt: m.Attempt, Redelivered: m.Attempt > 1,
			Notification: notifier.Notification{Flow: avail.Flow, Event: o.ev.Event,
				Recipient: notifier.Recipient{ID: o.w.ID, Address: o.w.WebhookURL, Secret: o.w.Secret},
				EventID:   o.ev.EventID, SessionID: o.ev.SessionID, Subject: o.ev.Entity.Key, TraceID: o.ev.TraceID,
				ObservedAt: o.ev.RunAt, Body: body, Text: o.ev.Text}}
		dels, at = append(dels, del), append(at, i)
	}
	if len(dels) == 0 {
		return outcomes, errs
	}
	opts := notifier.BatchOptions{Concurrency: h.cfg.Concurrency, History: h.cfg.History}
	opts.Record = func(k int, outcome string, err error) []history.Record {
		rec, ok := dels[k].HistoryRecord(outcome, err, time.Now().UTC())
		if !ok {
			return nil
		}
		rec.RunID = runID
		return []history.Record{rec}
	}
	if h.cfg.Throttle != nil {
		opts.Before = func(ctx context.Context, idx []int) []func(context.Context) error {
			asks := make([]throttle.Ask, len(idx))
			for k, i := range idx {
				asks[k] = throttle.Ask{Dest: dels[i].Notification.Recipient.ID, Channel: dels[i].Channel}
			}
			return notifier.ThrottleHooks(ctx, h.cfg.Throttle, asks, notifier.DefaultMaxThrottleWait)
		}
	}
	got, gotErrs := h.dispatch.DeliverBatch(ctx, dels, opts)
	for k, i := range at {
		outcomes[i], errs[i] = got[k], gotErrs[k]
		h.blockRetryAfter(ctx, dels[k], errs[i])
	}
	return outcomes, errs
}

// told reports whether a delivery reached its watcher (now or before).
func told(outcome string, err error) bool {
	return err == nil && (outcome == notifier.OutcomeSent || outcome == notifier.OutcomeDuplicate)
}

// traceOf is the transition's trace id, else the handler's.
func traceOf(ctx context.Context, t avail.Transition) string {
	return cmp.Or(t.TraceID, flow.TraceIDFrom(ctx))
}

// active drops paused watchers, in place.
func active(ws []Watcher) []Watcher {
	return slices.DeleteFunc(ws, func(w Watcher) bool { return w.Paused })
}

// markKey is a hash of an entity's watchers: "prov" (watcher id →
// provisional event id) or "told" (watcher id → told open event id).
func (h *handler) markKey(partition int, kind, entityKey string) string {
	return rediskey.Key(h.topic.HashTag(partition), "notifier", kind, entityKey)
}

// mark sets fields of an entity's mark hash and renews its expiry.
func (h *handler) mark(ctx context.Context, key string, fields map[string]string) error {
	if len(fields) == 0 {
		return nil
	}
	_, err := h.windows.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.HSet(ctx, key, fields)
		pipe.PExpire(ctx, key, h.cfg.WindowTTL)
		return nil
	})
	if err != nil {
		return fmt.Errorf("notifier: mark %s: %w", key, err)
	}
	return nil
}

// notify tells a stable open to every matching, unpaused watcher its
// re-arm rule lets through, and confirms the provisional notices.
func (h *handler) notify(ctx context.Context, m *stream.Message, t avail.Transition) error {
	entity := withIdentity(t.Entity)
	win, err := h.windows.window(ctx, m.Partition, entity.Key, t.RunID, t.RunAt)
	if err != nil {
		return err
	}
	if err := h.confirm(ctx, m.Partition, entity.Key, win); err != nil {
		return err
	}
	watchers, err := h.store.Match(ctx, entity)
	if watchers = active(watchers); err != nil || len(watchers) == 0 {
		return err
	}
	if !win.OK {
		h.unresolved.Add(context.Background(), 1)
		h.logger.WarnContext(ctx, "notifier: raw open of a stable open not seen; notifying without session id",
			"entity", entity.Key, "run_id", t.RunID, "message_id", m.ID)
		win.OpenedAt = t.RunAt
	}
	blind, err := h.blindBefore(ctx, t.SourceID, win.OpenedAt)
	if err != nil {
		return err
	}
	eventID := avail.EventID(t.RunID, entity.Key, avail.KindOpen, true)
	ev := OpenEvent{Event: EventAvailabilityOpen, Entity: entity, RunAt: t.RunAt, EventID: eventID, SessionID: win.Session,
		TraceID: traceOf(ctx, t), BlindForSeconds: blind}
	if blind > 0 {
		ev.Text = fmt.Sprintf("source was blind for %s before this opening was seen", minutes(blind))
	}
	var outs []outgoing
	for _, w := range watchers {
		if w.RearmAfterMinutes > 0 && win.Reopened && win.ClosedFor.Minutes() < float64(w.RearmAfterMinutes) {
			continue // closed for less than the watcher's re-arm time: still the opening it was told
		}
		ev.WatcherID = w.ID
		outs = append(outs, outgoing{w: w, key: w.ID + ":" + eventID, ev: ev})
	}
	outcomes, errs := h.send(ctx, m, t.RunID, outs)
	toldGone := map[string]string{}
	for i, o := range outs {
		if o.w.NotifyGone && told(outcomes[i], errs[i]) {
			toldGone[o.w.ID] = eventID
		}
	}
	errs = append(errs, h.mark(ctx, h.markKey(m.Partition, "told", entity.Key), toldGone))
	return notifier.Settle(errs)
}

// gone tells a stable close to the watchers told the opening that want it.
func (h *handler) gone(ctx context.Context, m *stream.Message, t avail.Transition) error {
	return h.settleMarks(ctx, m, t, "told", func(entity avail.Entity, _ map[string]string, watchers []Watcher) []outgoing {
		eventID := avail.EventID(t.RunID, entity.Key, avail.KindClose, true)
		var outs []outgoing
		for _, w := range active(watchers) {
			if w.NotifyGone {
				outs = append(outs, outgoing{w: w, key: w.ID + ":gone:" + eventID, ev: OpenEvent{Event: EventAvailabilityGone, WatcherID: w.ID,
					Entity: entity, RunAt: t.RunAt, EventID: eventID, TraceID: traceOf(ctx, t), Text: "the opening you were told of is gone"}})
			}
		}
		return outs
	})
}

// provisional tells a raw open to the matching watchers that asked, and
// remembers them so the raw close retracts it unless a stable open confirms.
func (h *handler) provisional(ctx context.Context, m *stream.Message, t avail.Transition) error {
	entity := withIdentity(t.Entity)
	watchers, err := h.store.Match(ctx, entity)
	if err != nil {
		return err
	}
	eventID := avail.EventID(t.RunID, entity.Key, avail.KindOpen, false)
	session := avail.SessionID(entity.Key, t.RunID)
	var outs []outgoing
	for _, w := range active(watchers) {
		if w.Provisional {
			outs = append(outs, outgoing{w: w, key: w.ID + ":" + eventID, ev: OpenEvent{Event: EventAvailabilityProvisional, WatcherID: w.ID,
				Entity: entity, RunAt: t.RunAt, EventID: eventID, SessionID: session, TraceID: traceOf(ctx, t),
				Text: "seen open once, not yet confirmed"}})
		}
	}
	outcomes, errs := h.send(ctx, m, t.RunID, outs)
	pending := map[string]string{}
	for i, o := range outs {
		if told(outcomes[i], errs[i]) {
			pending[o.w.ID] = eventID
		}
	}
	errs = append(errs, h.mark(ctx, h.markKey(m.Partition, "prov", entity.Key), pending))
	return notifier.Settle(errs)
}

// confirmedField is the field of an entity's "prov" hash naming the
// session a stable open confirmed; watcher ids never start with "~".
const confirmedField = "~confirmed"

// confirm records the window as confirmed, so its raw close retracts no
// provisional notice (even one a replay records again).
func (h *handler) confirm(ctx context.Context, partition int, entityKey string, win window) error {
	key := h.markKey(partition, "prov", entityKey)
	var err error
	if win.OK {
		err = h.mark(ctx, key, map[string]string{confirmedField: win.Session})
	} else {
		err = h.windows.rdb.Del(ctx, key).Err()
	}
	if err != nil {
		return fmt.Errorf("notifier: confirm provisional notices of %s: %w", entityKey, err)
	}
	return nil
}

// retract sends, on a raw close of an unconfirmed window, a retraction to
// each watcher told a provisional notice, paused or not.
func (h *handler) retract(ctx context.Context, m *stream.Message, t avail.Transition) error {
	return h.settleMarks(ctx, m, t, "prov", func(entity avail.Entity, marks map[string]string, watchers []Watcher) []outgoing {
		// The window is the one the diff names as raw open; a close naming none
		// ends the notices remembered, unless some window was confirmed.
		session, provID := "", ""
		if t.OpenRunID != "" {
			session, provID = avail.SessionID(entity.Key, t.OpenRunID), avail.EventID(t.OpenRunID, entity.Key, avail.KindOpen, false)
		}
		eventID := avail.EventID(t.RunID, entity.Key, avail.KindClose, false)
		outs := make([]outgoing, 0, len(watchers))
		for _, w := range watchers {
			prov := marks[w.ID]
			if session != "" && (marks[confirmedField] == session || prov != provID) || session == "" && marks[confirmedField] != "" {
				continue
			}
			outs = append(outs, outgoing{w: w, key: w.ID + ":retract:" + prov, ev: OpenEvent{Event: EventAvailabilityRetracted, WatcherID: w.ID,
				Entity: entity, RunAt: t.RunAt, EventID: eventID,
				TraceID: traceOf(ctx, t), RetractsEventID: prov, Text: "the provisional opening closed before it was confirmed"}})
			outs[len(outs)-1].ev.SessionID = session
		}
		return outs
	})
}

// settleMarks reads the kind marks of t's entity (watcher id → event
// told) and, when there are some, sends what outs makes of them and of the
// marked watchers that still exist; once every send is settled it deletes
// the marks, so the next window starts afresh.
func (h *handler) settleMarks(ctx context.Context, m *stream.Message, t avail.Transition, kind string,
	outs func(entity avail.Entity, marks map[string]string, watchers []Watcher) []outgoing) error {
	entity := withIdentity(t.Entity)
	key := h.markKey(m.Partition, kind, entity.Key)
	marks, err := h.windows.rdb.HGetAll(ctx, key).Result()
	if err != nil || len(marks) == 0 {
		return err
	}
	watchers, err := h.store.load(ctx, slices.Collect(maps.Keys(marks)))
	if err != nil {
		return err
	}
	_, errs := h.send(ctx, m, t.RunID, outs(entity, marks, watchers))
	if err := notifier.Settle(errs); err != nil {
		return err
	}
	return h.windows.rdb.Del(ctx, key).Err()
}
