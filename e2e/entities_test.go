package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/clickhouse/clickhousetest"
	"github.com/dropstream/dropstream/writer"
)

// checkProjectionEntities compares every entity's projection (state and
// stable state) and, when withSessions, its current session and session
// history with the raw windows and stable states the truths give. The
// sessions are right only when each entity's transitions were applied in
// order: after a copy of the projection was killed with transitions in
// hand, they are applied after newer ones and the sessions go wrong
// (TestProjection_sessionsAfterRedelivery).
func checkProjectionEntities(t *testing.T, ctx context.Context, proj *writer.Projection, exp expectation, withSessions bool) {
	t.Helper()
	for _, key := range sortedKeys(exp.windowed()) {
		ws := exp.windows[key]
		last := ws[len(ws)-1]
		wantState := writer.StateClosed
		if last.closeRun == "" {
			wantState = writer.StateOpen
		}
		got, err := proj.Get(ctx, key)
		if err != nil {
			t.Errorf("projection of %s: %v", key, err)
			continue
		}
		if got.State != wantState || got.StableState != exp.stable[key] {
			t.Errorf("projection of %s: state %q, stable state %q; want %q, %q", key, got.State, got.StableState, wantState, exp.stable[key])
		}
		if !withSessions {
			continue
		}
		if got.SessionID != avail.SessionID(key, last.openRun) {
			t.Errorf("projection of %s: session %s, want %s (opened by run %s)", key, got.SessionID, avail.SessionID(key, last.openRun), last.openRun)
		}
		if !sameMs(got.FirstSeenAt, ws[0].openAt) || !sameMs(got.OpenedAt, last.openAt) ||
			last.closeRun != "" && (!sameMs(got.ClosedAt, last.closeAt) || !sameMs(got.LastSeenAt, last.seenAt)) {
			t.Errorf("projection of %s: first seen %v, opened %v, closed %v, last seen %v; want %v, %v, and for a closed one %v, %v",
				key, got.FirstSeenAt, got.OpenedAt, got.ClosedAt, got.LastSeenAt, ws[0].openAt, last.openAt, last.closeAt, last.seenAt)
		}
		sessions, err := proj.Sessions(ctx, key, 0)
		if err != nil {
			t.Errorf("sessions of %s: %v", key, err)
			continue
		}
		if len(sessions) != len(ws) {
			t.Errorf("%s: %d sessions in the projection, want %d: %+v", key, len(sessions), len(ws), ws)
			continue
		}
		for i, s := range sessions { // newest first
			w := ws[len(ws)-1-i]
			want := writer.Session{ID: avail.SessionID(key, w.openRun), State: writer.StateOpen, OpenRun: w.openRun, CloseRun: w.closeRun}
			if w.closeRun != "" {
				want.State = writer.StateClosed
			}
			if s.ID != want.ID || s.State != want.State || s.OpenRun != want.OpenRun || s.CloseRun != want.CloseRun ||
				!sameMs(s.OpenedAt, w.openAt) || !sameMs(s.ClosedAt, w.closeAt) || s.Duration != w.duration() {
				t.Errorf("%s: projection session %d = %+v, want %+v opened at %v, closed at %v, lasting %v",
					key, i, s, want, w.openAt, w.closeAt, w.duration())
			}
		}
	}
}

// checkClickHouseSessions compares every entity's sessions in ClickHouse
// (latest version of each) with its raw windows.
func checkClickHouseSessions(t *testing.T, ctx context.Context, ch *clickhouse.Client, exp expectation) {
	t.Helper()
	for _, key := range sortedKeys(exp.windowed()) {
		ws := exp.windows[key]
		rows, err := clickhousetest.EntitySessions(ctx, ch, key, 0)
		if err != nil {
			t.Errorf("ClickHouse sessions of %s: %v", key, err)
			continue
		}
		if len(rows) != len(ws) {
			t.Errorf("%s: %d sessions in ClickHouse, want %d: %+v", key, len(rows), len(ws), ws)
			continue
		}
		for i, r := range rows { // oldest first
			w := ws[i]
			if r.SessionID != avail.SessionID(key, w.openRun) || r.OpenRunID != w.openRun || r.CloseRunID != w.closeRun || r.Closed != (w.closeRun != "") ||
				!sameMs(r.OpenedAt, w.openAt) || !sameMs(r.ClosedAt, w.closeAt) || r.Duration != w.duration() {
				t.Errorf("%s: ClickHouse session %d = %s opened by %s at %v, closed %v by %q at %v, lasting %v; want opened by %s at %v, closed by %q at %v, lasting %v",
					key, i, r.SessionID, r.OpenRunID, r.OpenedAt, r.Closed, r.CloseRunID, r.ClosedAt, r.Duration, w.openRun, w.openAt, w.closeRun, w.closeAt, w.duration())
			}
		}
	}
}

// sameMs reports whether two times are equal at the millisecond precision
// of the projection and ClickHouse, a zero time matching only a zero time.
func sameMs(a, b time.Time) bool {
	if a.IsZero() || b.IsZero() {
		return a.IsZero() == b.IsZero()
	}
	return a.UnixMilli() == b.UnixMilli()
}

// duration is how long a closed window lasted, at millisecond precision;
// zero while open.
func (w window) duration() time.Duration {
	if w.closeRun == "" {
		return 0
	}
	return time.Duration(w.closeAt.UnixMilli()-w.openAt.UnixMilli()) * time.Millisecond
}

// windowed returns the keys of the entities with at least one raw window.
func (e expectation) windowed() map[string]bool {
	keys := map[string]bool{}
	for k, ws := range e.windows {
		if len(ws) > 0 {
			keys[k] = true
		}
	}
	return keys
}
