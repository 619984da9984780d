package avail

import (
	"cmp"
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/avail/availjson"
	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/internal/tenancy"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer/sink"
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
		ts, err := availjson.DecodeTransitions(e.Type, e.Payload)
		if err != nil {
			continue // another type, or undecodable
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

// StageHealthHistory appends the sources' health transitions to
// ClickHouse's source_health table.
const StageHealthHistory = "avail-health-history"

// maxHealthError bounds the error text kept in a health row.
const maxHealthError = 512

// HealthHistoryConfig configures the "avail-health-history" stage: each
// source health transition becomes a source_health row, collapsed by
// event id.
func HealthHistoryConfig(topics Topics) sink.HistoryConfig[clickhouse.SourceHealthRow] {
	return sink.HistoryConfig[clickhouse.SourceHealthRow]{Stage: StageHealthHistory, Topic: topics.Transitions,
		Tables: []string{clickhouse.TableSourceHealth}, Rows: HealthRows, Insert: clickhouse.InsertSourceHealth}
}

// HealthRows returns a transitions message's source_health rows; an
// undecodable message is a stream.Permanent error.
func HealthRows(m *stream.Message) ([]clickhouse.SourceHealthRow, error) {
	if m.Type != avail.TypeTransition && m.Type != avail.TypeTransitions {
		return nil, nil
	}
	ts, err := availjson.DecodeTransitions(m.Type, m.Payload)
	if err != nil {
		return nil, stream.Permanentf("avail: decode transitions %s: %w", m.ID, err)
	}
	var rows []clickhouse.SourceHealthRow
	for _, t := range ts {
		if t.Entity.Kind != avail.EntitySource || !t.Stable {
			continue
		}
		r := clickhouse.SourceHealthRow{EventID: t.EventID, SourceID: t.SourceID, Provider: t.Entity.Provider, Status: "down",
			RunID: t.RunID, At: t.RunAt, Error: t.Entity.Attrs["error"], TraceID: t.TraceID}
		r.SourceID = cmp.Or(r.SourceID, t.Entity.Venue)
		if len(r.Error) > maxHealthError {
			r.Error = r.Error[:maxHealthError]
		}
		n, _ := strconv.ParseUint(t.Entity.Attrs["consecutive_failures"], 10, 32)
		r.ConsecutiveFailures = uint32(n)
		if t.Kind == avail.KindClose {
			r.BlindSince = t.LastSeen
		} else {
			r.Status = "up"
			if since, err := time.Parse(time.RFC3339Nano, t.Entity.Attrs["blind_since"]); err == nil {
				r.BlindSince = since
				r.BlindForSeconds = uint32(min(max(t.RunAt.Sub(since).Seconds(), 0), 1<<32-1))
			}
		}
		rows = append(rows, r)
	}
	return rows, nil
}
