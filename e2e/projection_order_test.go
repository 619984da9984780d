package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer"
)

// TestProjection_sessionsAfterRedelivery applies one entity's raw flips
// (open in r1, close in r2, open again in r3) in the orders a crash of the
// projection's copy produces: the transitions it held are redelivered after
// ClaimIdle, once the next copy has applied newer ones of the same
// partition. Whatever the order, the projection must end as in order: open,
// in the session r3 opened, after a closed session r1–r2 — as ClickHouse
// (writer.Analytics pairs flips in any order) and the notifier (which names
// the session r3) have it.
func TestProjection_sessionsAfterRedelivery(t *testing.T) {
	ctx := context.Background()
	topics := avail.NewTopics(partitions)
	proj, err := writer.NewProjection(dial(t, testenv.RedisURL(t)), writer.ProjectionConfig{Partitions: partitions}, stream.Telemetry{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		slot  string
		order []int // indexes into the flips r1, r2, r3
	}{
		{name: "in order", slot: "18:00", order: []int{0, 1, 2}},
		{name: "close redelivered after the reopen", slot: "18:15", order: []int{0, 2, 1}},
		{name: "open and close redelivered after the reopen", slot: "18:30", order: []int{2, 0, 1}},
	}
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			scope := avail.Scope{Venue: "1001", Date: simDate, PartySize: 2}
			scopeKey := scope.Key(sourceID)
			key := avail.SlotKey("simulator", "1001", simDate, tt.slot, 2)
			entity, err := avail.ParseKey(key)
			if err != nil {
				t.Fatal(err)
			}
			flip := func(run, kind string, at time.Time) avail.Transition {
				return avail.Transition{EventID: avail.EventID(run, key, kind, false), Entity: entity, ScopeKey: scopeKey,
					SourceID: sourceID, Kind: kind, Raw: true, RunID: run, RunAt: at}
			}
			flips := []avail.Transition{flip("r1", avail.KindOpen, base), flip("r2", avail.KindClose, base.Add(time.Minute)),
				flip("r3", avail.KindOpen, base.Add(2*time.Minute))}
			for _, i := range tt.order {
				res, err := proj.Apply(ctx, topics.Transitions.Partition(scopeKey), flips[i])
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%s %s: %s", flips[i].RunID, flips[i].Kind, res)
			}
			got, err := proj.Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if want := avail.SessionID(key, "r3"); got.State != writer.StateOpen || got.SessionID != want {
				t.Errorf("state %q, session %s; want open, session %s (opened by r3)", got.State, got.SessionID, want)
			}
			sessions, err := proj.Sessions(ctx, key, 0)
			if err != nil {
				t.Fatal(err)
			}
			var runs [][2]string
			for _, s := range sessions {
				runs = append(runs, [2]string{s.OpenRun, s.CloseRun})
			}
			if want := [][2]string{{"r3", ""}, {"r1", "r2"}}; len(runs) != 2 || runs[0] != want[0] || runs[1] != want[1] {
				t.Errorf("sessions (open run, close run), newest first = %v, want %v", runs, want)
			}
		})
	}
}
