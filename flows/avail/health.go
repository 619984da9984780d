package avail

import (
	"cmp"
	"strconv"
	"time"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/avail/availjson"
	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer/sink"
)

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
