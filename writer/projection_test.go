package writer_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/internal/telemetrytest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer"
)

const partitions = 8

func newProjection(t *testing.T, rdb redis.UniversalClient, maxSessions int) *writer.Projection {
	t.Helper()
	p, err := writer.NewProjection(rdb, writer.ProjectionConfig{Partitions: partitions, MaxSessions: maxSessions}, stream.Telemetry{})
	if err != nil {
		t.Fatalf("NewProjection: %v", err)
	}
	return p
}

// step is one transition and the result applying it must give.
type step struct {
	kind   string
	run    int
	stable bool
	raw    bool // with stable: both at once (stabilization 1)
	bare   bool // the entity as its key tells it, as the diff sends closes
	seen   int  // LastSeen run, 0: none
	want   writer.ApplyResult
}

// wantSession is a session as Sessions must return it.
type wantSession struct {
	state           string
	openRun, closed int // closed: close run, 0 while open
}

func TestProjection_appliesTransitions(t *testing.T) {
	tests := []struct {
		name        string
		steps       []step
		maxSessions int
		state       string
		stable      string
		opened      int // run of opened_at, -1: unset
		closed      int // run of closed_at, -1: unset
		firstSeen   int // -1: unset
		lastSeen    int // -1: unset
		lastRun     int
		sessions    []wantSession // newest first
	}{
		{name: "open starts a session",
			steps: []step{{kind: "open", run: 1, want: writer.ResultOpened}},
			state: "open", opened: 1, closed: -1, firstSeen: 1, lastSeen: 1, lastRun: 1,
			sessions: []wantSession{{"open", 1, 0}}},
		{name: "close ends the session and deletes nothing",
			steps: []step{{kind: "open", run: 1, want: writer.ResultOpened},
				{kind: "close", run: 3, seen: 2, bare: true, want: writer.ResultClosed}},
			state: "closed", opened: 1, closed: 3, firstSeen: 1, lastSeen: 2, lastRun: 3,
			sessions: []wantSession{{"closed", 1, 3}}},
		{name: "raw and stable at once",
			steps: []step{{kind: "open", run: 1, raw: true, stable: true, want: writer.ResultOpened},
				{kind: "close", run: 2, raw: true, stable: true, bare: true, want: writer.ResultClosed},
				{kind: "close", run: 2, raw: true, stable: true, bare: true, want: writer.ResultDuplicate}},
			state: "closed", stable: "closed", opened: 1, closed: 2, firstSeen: 1, lastSeen: 1, lastRun: 2,
			sessions: []wantSession{{"closed", 1, 2}}},
		{name: "reopen starts a second session",
			steps: []step{{kind: "open", run: 1, want: writer.ResultOpened},
				{kind: "close", run: 2, want: writer.ResultClosed},
				{kind: "open", run: 5, want: writer.ResultOpened}},
			state: "open", opened: 5, closed: 2, firstSeen: 1, lastSeen: 5, lastRun: 5,
			sessions: []wantSession{{"open", 5, 0}, {"closed", 1, 2}}},
		{name: "duplicates change nothing",
			steps: []step{{kind: "open", run: 1, want: writer.ResultOpened},
				{kind: "open", run: 1, want: writer.ResultDuplicate},
				{kind: "close", run: 2, want: writer.ResultClosed},
				{kind: "close", run: 2, want: writer.ResultDuplicate},
				{kind: "open", run: 1, want: writer.ResultDuplicate}},
			state: "closed", opened: 1, closed: 2, firstSeen: 1, lastSeen: 1, lastRun: 2,
			sessions: []wantSession{{"closed", 1, 2}}},
		{name: "an older run keeps the state and joins the sessions",
			steps: []step{{kind: "open", run: 1, want: writer.ResultOpened},
				{kind: "close", run: 3, want: writer.ResultClosed},
				{kind: "open", run: 2, want: writer.ResultStale}},
			state: "closed", opened: 2, closed: 3, firstSeen: 1, lastSeen: 2, lastRun: 3,
			sessions: []wantSession{{"closed", 2, 3}, {"open", 1, 0}}},
		{name: "open while open starts a session, as in ClickHouse",
			steps: []step{{kind: "open", run: 1, want: writer.ResultOpened},
				{kind: "open", run: 4, want: writer.ResultAlreadyOpen}},
			state: "open", opened: 4, closed: -1, firstSeen: 1, lastSeen: 4, lastRun: 4,
			sessions: []wantSession{{"open", 4, 0}, {"open", 1, 0}}},
		{name: "a close redelivered after the reopen closes the first session",
			steps: []step{{kind: "open", run: 1, want: writer.ResultOpened},
				{kind: "open", run: 3, want: writer.ResultAlreadyOpen},
				{kind: "close", run: 2, seen: 1, bare: true, want: writer.ResultStale},
				{kind: "close", run: 2, seen: 1, bare: true, want: writer.ResultDuplicate}},
			state: "open", opened: 3, closed: 2, firstSeen: 1, lastSeen: 3, lastRun: 3,
			sessions: []wantSession{{"open", 3, 0}, {"closed", 1, 2}}},
		{name: "an open redelivered after its close opens the session",
			steps: []step{{kind: "close", run: 3, seen: 2, bare: true, want: writer.ResultAlreadyClosed},
				{kind: "open", run: 1, want: writer.ResultStale}},
			state: "closed", opened: 1, closed: 3, firstSeen: 1, lastSeen: 2, lastRun: 3,
			sessions: []wantSession{{"closed", 1, 3}}},
		{name: "close of an unknown entity records it closed without a session",
			steps: []step{{kind: "close", run: 2, seen: 1, want: writer.ResultAlreadyClosed}},
			state: "closed", opened: -1, closed: 2, firstSeen: -1, lastSeen: 1, lastRun: 2},
		{name: "stable transitions set only stable_state",
			steps: []step{{kind: "open", run: 1, want: writer.ResultOpened},
				{kind: "open", run: 2, stable: true, want: writer.ResultStable},
				{kind: "open", run: 2, stable: true, want: writer.ResultDuplicate},
				{kind: "close", run: 1, stable: true, want: writer.ResultStale}},
			state: "open", stable: "open", opened: 1, closed: -1, firstSeen: 1, lastSeen: 1, lastRun: 1,
			sessions: []wantSession{{"open", 1, 0}}},
		{name: "sessions are bounded, newest kept",
			maxSessions: 2,
			steps: []step{{kind: "open", run: 1, want: writer.ResultOpened},
				{kind: "close", run: 2, want: writer.ResultClosed},
				{kind: "open", run: 3, want: writer.ResultOpened},
				{kind: "close", run: 4, want: writer.ResultClosed},
				{kind: "open", run: 5, want: writer.ResultOpened}},
			state: "open", opened: 5, closed: 4, firstSeen: 1, lastSeen: 5, lastRun: 5,
			sessions: []wantSession{{"open", 5, 0}, {"closed", 3, 4}}},
	}
	for _, be := range backends(t) {
		t.Run(be.name, func(t *testing.T) {
			for i, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					ctx := t.Context()
					p := newProjection(t, be.rdb, tt.maxSessions)
					e := slot(fmt.Sprintf("v%d", i))
					part := avail.NewTopics(partitions).Transitions.Partition(scopeKey(e.Venue))
					for j, s := range tt.steps {
						tr := transition(e, s.kind, s.run, s.stable)
						tr.Raw = s.raw
						if s.bare {
							tr.Entity, _ = avail.ParseKey(e.Key)
						}
						if s.seen > 0 {
							tr.LastSeen = runAt(s.seen)
						}
						got, err := p.Apply(ctx, part, tr)
						if err != nil || got != s.want {
							t.Fatalf("step %d (%s run %d stable %v) = %q, %v; want %q", j, s.kind, s.run, s.stable, got, err, s.want)
						}
					}
					got, err := p.Get(ctx, e.Key)
					if err != nil {
						t.Fatalf("Get: %v", err)
					}
					checkEntity(t, got, e, part, tt.state, tt.stable, tt.opened, tt.closed, tt.firstSeen, tt.lastSeen, tt.lastRun)
					sessions, err := p.Sessions(ctx, e.Key, 0)
					if err != nil {
						t.Fatalf("Sessions: %v", err)
					}
					checkSessions(t, e.Key, sessions, tt.sessions)
				})
			}
		})
	}
}

func checkEntity(t *testing.T, got writer.EntityState, e avail.Entity, part int, state, stable string,
	opened, closed, firstSeen, lastSeen, lastRun int) {
	t.Helper()
	at := func(run int) time.Time {
		if run < 0 {
			return time.Time{}
		}
		return runAt(run)
	}
	want := writer.EntityState{Key: e.Key, Partition: part, State: state, StableState: stable,
		Kind: e.Kind, Provider: e.Provider, Venue: e.Venue, VenueName: e.VenueName, Date: e.Date, Time: e.Time,
		PartySize: e.PartySize, ScopeKey: scopeKey(e.Venue), SourceID: "src",
		OpenedAt: at(opened), ClosedAt: at(closed), FirstSeenAt: at(firstSeen), LastSeenAt: at(lastSeen),
		LastRun: runID(lastRun), LastRunAt: runAt(lastRun)}
	// Fields that depend on the last steps are checked for presence only.
	want.StableAt, want.LastEvent, want.SessionID, want.TraceID = got.StableAt, got.LastEvent, got.SessionID, got.TraceID
	if got != want {
		t.Fatalf("Get =\n%+v\nwant\n%+v", got, want)
	}
	if got.LastEvent == "" || got.TraceID == "" || (stable != "") != !got.StableAt.IsZero() {
		t.Fatalf("Get = %+v: last_event, trace_id or stable_at missing", got)
	}
	if opened >= 0 && got.SessionID != avail.SessionID(e.Key, runID(opened)) {
		t.Fatalf("session_id = %s, want that of run %d", got.SessionID, opened)
	}
}

func checkSessions(t *testing.T, key string, got []writer.Session, want []wantSession) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("Sessions = %+v, want %d sessions", got, len(want))
	}
	for i, w := range want {
		s := got[i]
		ok := s.State == w.state && s.ID == avail.SessionID(key, runID(w.openRun)) &&
			s.OpenRun == runID(w.openRun) && s.OpenedAt.Equal(runAt(w.openRun))
		if w.closed > 0 {
			ok = ok && s.CloseRun == runID(w.closed) && s.ClosedAt.Equal(runAt(w.closed)) &&
				s.Duration == runAt(w.closed).Sub(runAt(w.openRun))
		} else {
			ok = ok && s.CloseRun == "" && s.ClosedAt.IsZero() && s.Duration == 0
		}
		if !ok || s.TraceID == "" {
			t.Fatalf("session %d = %+v, want %+v", i, s, w)
		}
	}
}

// snapshot dumps every key of a Redis database with its content.
func snapshot(t *testing.T, rdb redis.UniversalClient) map[string]string {
	t.Helper()
	ctx := t.Context()
	out := map[string]string{}
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatalf("KEYS: %v", err)
	}
	for _, k := range keys {
		var v any
		switch typ := rdb.Type(ctx, k).Val(); typ {
		case "hash":
			v = rdb.HGetAll(ctx, k).Val()
		case "list":
			v = rdb.LRange(ctx, k, 0, -1).Val()
		case "zset":
			v = rdb.ZRange(ctx, k, 0, -1).Val()
		default:
			v = typ
		}
		out[k] = fmt.Sprint(v)
	}
	return out
}

func TestProjection_replaysChangeNothing(t *testing.T) {
	for _, be := range backends(t) {
		t.Run(be.name, func(t *testing.T) {
			ctx := t.Context()
			p := newProjection(t, be.rdb, 0)
			var history []avail.Transition
			for v := range 3 {
				e := slot(fmt.Sprintf("replay%d", v))
				history = append(history, transition(e, "open", 1, false), transition(e, "close", 2, false),
					transition(e, "open", 2, true), transition(e, "open", 4, false), transition(e, "close", 4, true))
			}
			apply := func(trs []avail.Transition) {
				for _, tr := range trs {
					part := avail.NewTopics(partitions).Transitions.Partition(tr.ScopeKey)
					if _, err := p.Apply(ctx, part, tr); err != nil {
						t.Fatalf("Apply: %v", err)
					}
				}
			}
			apply(history)
			before := snapshot(t, be.rdb)
			reversed := slices.Clone(history)
			slices.Reverse(reversed)
			apply(history)
			apply(reversed)
			if after := snapshot(t, be.rdb); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Fatalf("replay changed the projection:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}

func TestProjection_rejectsInvalidInput(t *testing.T) {
	p := newProjection(t, backends(t)[0].rdb, 0)
	good := transition(slot("v"), "open", 1, false)
	tests := []struct {
		name   string
		part   int
		mutate func(*avail.Transition)
	}{
		{"partition out of range", partitions, func(*avail.Transition) {}},
		{"negative partition", -1, func(*avail.Transition) {}},
		{"empty entity key", 0, func(tr *avail.Transition) { tr.Entity.Key = "" }},
		{"empty run id", 0, func(tr *avail.Transition) { tr.RunID = "" }},
		{"newline in run id", 0, func(tr *avail.Transition) { tr.RunID = "a\nb" }},
		{"unknown kind", 0, func(tr *avail.Transition) { tr.Kind = "flip" }},
		{"zero run_at", 0, func(tr *avail.Transition) { tr.RunAt = time.Time{} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := good
			tt.mutate(&tr)
			if _, err := p.Apply(t.Context(), tt.part, tr); err == nil {
				t.Fatal("Apply succeeded")
			}
		})
	}
	if _, err := p.Get(t.Context(), "resy|nowhere|2025-01-01|19:00|2"); !errors.Is(err, writer.ErrNotFound) {
		t.Fatalf("Get of an unknown key = %v, want ErrNotFound", err)
	}
	if _, err := p.Sessions(t.Context(), "resy|nowhere|2025-01-01|19:00|2", 5); !errors.Is(err, writer.ErrNotFound) {
		t.Fatalf("Sessions of an unknown key = %v, want ErrNotFound", err)
	}
}

func TestProjection_stageConsumesTheTransitionStream(t *testing.T) {
	for _, be := range backends(t) {
		t.Run(be.name, func(t *testing.T) {
			ctx := t.Context()
			p := newProjection(t, be.rdb, 0)
			stage := p.Stage()
			stage.Config.Block = 50 * time.Millisecond
			runStages(t, be.rdb, stage)
			pub := stream.NewPublisher(be.rdb, stream.Telemetry{})
			topic := avail.NewTopics(partitions).Transitions
			var msgs []*stream.Message
			for v := range 20 {
				e := slot(fmt.Sprintf("s%02d", v))
				for _, tr := range []avail.Transition{transition(e, "open", 1, false), transition(e, "close", 3, false)} {
					body, _ := json.Marshal(tr)
					msgs = append(msgs, stream.NewMessage(tr.ScopeKey, avail.TypeTransition, body))
				}
			}
			msgs = append(msgs, stream.NewMessage("x", avail.TypeTransition, []byte("not json")))
			if err := pub.Publish(ctx, topic, msgs...); err != nil {
				t.Fatalf("Publish: %v", err)
			}
			testenv.WaitFor(t, 10*time.Second, func() bool {
				items, _, err := p.List(ctx, writer.Filter{State: writer.StateClosed}, "", 100)
				return err == nil && len(items) == 20
			}, "20 closed entities")
			got, err := p.Sessions(ctx, slot("s07").Key, 10)
			if err != nil || len(got) != 1 || got[0].Duration != 2*time.Minute {
				t.Fatalf("Sessions = %+v, %v; want one closed 2m session", got, err)
			}
			dlq := topic.DeadLetterStream(topic.Partition("x"))
			testenv.WaitFor(t, 10*time.Second, func() bool { return be.rdb.XLen(ctx, dlq).Val() == 1 },
				"the undecodable transition dead-lettered")
		})
	}
}

func TestProjection_countsResults(t *testing.T) {
	mp, collect := telemetrytest.Metrics(t)
	p, err := writer.NewProjection(backends(t)[0].rdb, writer.ProjectionConfig{Partitions: partitions}, stream.Telemetry{MeterProvider: mp})
	if err != nil {
		t.Fatalf("NewProjection: %v", err)
	}
	tr := transition(slot("m"), "open", 1, false)
	for range 3 {
		if _, err := p.Apply(t.Context(), 0, tr); err != nil {
			t.Fatalf("Apply: %v", err)
		}
	}
	m, ok := telemetrytest.Find(collect(), writer.MetricProjectionApplied)
	if !ok {
		t.Fatalf("no %s metric", writer.MetricProjectionApplied)
	}
	got := map[string]int64{}
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		r, _ := dp.Attributes.Value("result")
		got[r.AsString()] = dp.Value
	}
	if got["opened"] != 1 || got["duplicate"] != 2 {
		t.Fatalf("results = %v, want 1 opened and 2 duplicates", got)
	}
}
