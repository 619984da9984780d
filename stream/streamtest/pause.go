package streamtest

import (
	"context"
	"testing"
	"time"

	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// testPauseResume: pausing a stage stops both of its copies from handling
// new messages, which wait as lag (still reported); resuming drains them,
// each handled once.
func testPauseResume(t *testing.T, b Backend) {
	rdb := b.Client(t)
	topic := newTopic(2)
	name := "pause-" + topic.Flow // the paused state is by stage name, shared by every test
	cfg := fastConfig()
	cfg.ControlInterval = 20 * time.Millisecond
	rec := newRecorder()
	stage := stream.Stage{Name: name, Topic: topic, Config: cfg,
		Handler: func(_ context.Context, m *stream.Message) error {
			rec.ok(m)
			return nil
		}}
	copies := []*running{start(t, rdb, stage, stream.Telemetry{}), start(t, rdb, stage, stream.Telemetry{})}
	const before, during = 100, 200
	publishN(t, rdb, topic, 0, before, 7)
	rec.waitAll(t, before)

	ctl := stream.NewControl(rdb)
	ctx := context.Background()
	if err := ctl.Pause(ctx, name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ctl.Resume(context.Background(), name) })
	testenv.WaitFor(t, waitTimeout, func() bool { return copies[0].runner.Paused() && copies[1].runner.Paused() },
		"the copies never paused")
	if all, err := ctl.Paused(ctx); err != nil || all[name].IsZero() {
		t.Fatalf("Paused() = %v, %v; want %s with the time it was paused", all, err, name)
	}
	publishN(t, rdb, topic, before, during, 7)
	// Both copies keep sampling: the new messages show up as their lag.
	testenv.WaitFor(t, waitTimeout, func() bool {
		return copies[0].runner.Lag() == during && copies[1].runner.Lag() == during
	}, "a paused stage's copies never reported the %d waiting messages as lag", during)
	if got := rec.distinct(); got != before {
		t.Fatalf("a paused stage handled %d messages, want %d (those before the pause)", got, before)
	}
	if got := pendingCount(t, rdb, topic, name); got != 0 {
		t.Errorf("a paused stage holds %d pending entries, want 0 (the batch in hand acknowledged)", got)
	}

	if err := ctl.Resume(ctx, name); err != nil {
		t.Fatal(err)
	}
	rec.waitAll(t, before+during)
	waitPending(t, rdb, topic, name, 0)
	seen, _, _ := rec.snapshot()
	for p, c := range seen {
		if c != 1 {
			t.Errorf("payload %s handled %d times across the pause", p, c)
		}
	}
	// One copy may drain everything before the other next reads the
	// stage's control; both must still see the resume.
	testenv.WaitFor(t, waitTimeout, func() bool { return !copies[0].runner.Paused() && !copies[1].runner.Paused() },
		"a copy still paused after the resume")
}

// testPauseBeforeStart: a copy that starts while its stage is paused reads
// nothing until the stage is resumed.
func testPauseBeforeStart(t *testing.T, b Backend) {
	rdb := b.Client(t)
	topic := newTopic(1)
	name := "paused-" + topic.Flow
	ctl := stream.NewControl(rdb)
	ctx := context.Background()
	if err := ctl.Pause(ctx, name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ctl.Resume(context.Background(), name) })
	const n = 50
	publishN(t, rdb, topic, 0, n, 3)
	cfg := fastConfig()
	cfg.ControlInterval = 20 * time.Millisecond
	rec := newRecorder()
	run := start(t, rdb, stream.Stage{Name: name, Topic: topic, Config: cfg,
		Handler: func(_ context.Context, m *stream.Message) error {
			rec.ok(m)
			return nil
		}}, stream.Telemetry{})
	testenv.WaitFor(t, waitTimeout, func() bool { return run.runner.Paused() && run.runner.Lag() == n },
		"the copy started under a pause never reported its lag while paused")
	if got := rec.distinct(); got != 0 {
		t.Fatalf("a copy started under a pause handled %d messages", got)
	}
	if err := ctl.Resume(ctx, name); err != nil {
		t.Fatal(err)
	}
	rec.waitAll(t, n)
}
