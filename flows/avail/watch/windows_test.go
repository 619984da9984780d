package watch

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dropstream/dropstream/avail"
)

func TestWindows_session(t *testing.T) {
	ctx := context.Background()
	at := func(run int) time.Time { return time.Date(2025, 7, 1, 18, run, 0, 0, time.UTC) }
	run := func(n int) string { return fmt.Sprintf("run-%02d", n) }
	const key = "resy|v1|2025-07-04|19:00|2"
	type flip struct {
		kind string
		run  int
	}
	tests := []struct {
		name   string
		flips  []flip
		stable int // run of the stable open
		want   int // run of the session's open; -1: unresolved
	}{
		{"raw open then stable", []flip{{"open", 1}}, 2, 1},
		{"stabilization 1: same run", []flip{{"open", 1}}, 1, 1},
		{"second window", []flip{{"open", 1}, {"close", 3}, {"open", 5}}, 6, 5},
		{"replay of the first window", []flip{{"open", 1}, {"close", 3}, {"open", 5}}, 2, 1},
		{"flips recorded twice", []flip{{"open", 1}, {"open", 1}, {"close", 3}, {"close", 3}, {"open", 5}}, 7, 5},
		{"flips recorded out of order", []flip{{"open", 5}, {"close", 3}, {"open", 1}}, 6, 5},
		{"raw open not seen", nil, 2, -1},
		{"raw open of this window not seen", []flip{{"open", 1}, {"close", 3}}, 6, -1},
		{"older than what is kept", []flip{{"open", 1}, {"close", 2}, {"open", 3}, {"close", 4}, {"open", 5}}, 1, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &windows{rdb: mini(t), topic: avail.NewTopics(4).Transitions, ttl: time.Hour, max: 4}
			for _, f := range tt.flips {
				if err := w.record(ctx, 1, key, f.kind, run(f.run), at(f.run)); err != nil {
					t.Fatal(err)
				}
			}
			got, ok, err := w.session(ctx, 1, key, run(tt.stable), at(tt.stable))
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.want < 0 && ok:
				t.Errorf("session = %s, want unresolved", got)
			case tt.want >= 0 && (!ok || got != avail.SessionID(key, run(tt.want))):
				t.Errorf("session = %q, %v; want that of %s", got, ok, run(tt.want))
			}
		})
	}
	t.Run("same millisecond orders by run id", func(t *testing.T) {
		w := &windows{rdb: mini(t), topic: avail.NewTopics(1).Transitions, ttl: time.Hour, max: 8}
		same := at(1)
		for _, f := range []flip{{"open", 1}, {"close", 2}, {"open", 3}} {
			if err := w.record(ctx, 0, key, f.kind, run(f.run), same); err != nil {
				t.Fatal(err)
			}
		}
		if got, ok, _ := w.session(ctx, 0, key, run(1), same); !ok || got != avail.SessionID(key, run(1)) {
			t.Errorf("stable open of run 1 resolved to %q, %v", got, ok)
		}
		if _, ok, _ := w.session(ctx, 0, key, run(2), same); ok {
			t.Error("a stable open right after a close resolved")
		}
	})
	t.Run("keys expire", func(t *testing.T) {
		rdb := mini(t)
		w := &windows{rdb: rdb, topic: avail.NewTopics(1).Transitions, ttl: time.Hour, max: 8}
		if err := w.record(ctx, 0, key, "open", run(1), at(1)); err != nil {
			t.Fatal(err)
		}
		ttl, err := rdb.PTTL(ctx, eventsKey(w.topic, 0, key)).Result()
		if err != nil || ttl <= 0 || ttl > time.Hour {
			t.Errorf("PTTL = %v, %v; want up to an hour", ttl, err)
		}
	})
}

// session returns the session id of the window a stable open of run
// (runAt, runID) confirms; ok false when it is unresolved.
func (w *windows) session(ctx context.Context, partition int, entityKey, runID string, runAt time.Time) (id string, ok bool, err error) {
	win, err := w.window(ctx, partition, entityKey, runID, runAt)
	return win.Session, win.OK, err
}
