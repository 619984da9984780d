package diff

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/avail/availjson"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// quiet discards the runners' logs.
var quiet = slog.New(slog.DiscardHandler)

// fastConfig makes runners quick to start, stop and redeliver in tests.
func fastConfig() stream.RunnerConfig {
	return stream.RunnerConfig{
		BatchSize: 100, Block: 50 * time.Millisecond, ClaimInterval: 25 * time.Millisecond,
		ClaimIdle: 500 * time.Millisecond, HandlerTimeout: 400 * time.Millisecond,
		StatsInterval: 50 * time.Millisecond, ErrorBackoff: 100 * time.Millisecond,
		Retry: stream.RetryConfig{Disabled: true},
	}
}

// steadyConfig is fastConfig for a test that needs no claim: a loaded
// machine redelivers nothing (a redelivered snapshot adds a run record).
func steadyConfig() stream.RunnerConfig {
	c := fastConfig()
	c.ClaimIdle, c.HandlerTimeout = 30*time.Second, 20*time.Second
	return c
}

// startStage runs a stage until the test ends.
func startStage(t *testing.T, rdb redis.UniversalClient, stage stream.Stage, tel stream.Telemetry) {
	t.Helper()
	r, err := stream.NewRunner(rdb, stage, tel)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("runner: %v", err)
		}
	})
}

// received is a transition read by the checking stage, with the trace id
// of the traceparent its entry carried.
type received struct {
	tr      Transition
	traceID trace.TraceID
}

// testStageEndToEnd runs the diff stage on a Runner, publishes snapshots of
// two scopes (with a replay), and checks with a second reader of the
// transitions stream what arrives, and that the trace continues.
func testStageEndToEnd(t *testing.T, rdb redis.UniversalClient) {
	topics := avail.NewTopics(4)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tel := stream.Telemetry{TracerProvider: tp, Propagator: propagation.TraceContext{}, Logger: quiet}
	stage := NewStage(rdb, topics, tel)
	if stage.Name != StageName || stage.Topic != topics.Snapshots {
		t.Fatalf("stage %q on %s, want %q on %s", stage.Name, stage.Topic, StageName, topics.Snapshots)
	}
	stage.Config = steadyConfig()
	startStage(t, rdb, stage, tel)

	var mu sync.Mutex
	var got []received
	startStage(t, rdb, stream.Stage{Name: "check", Topic: topics.Transitions, Config: steadyConfig(),
		Handler: func(ctx context.Context, m *stream.Message) error {
			trs, err := availjson.DecodeTransitions(m.Type, m.Payload)
			if err != nil {
				return stream.Permanent(err)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, tr := range trs {
				got = append(got, received{tr, trace.SpanContextFromContext(ctx).TraceID()})
			}
			return nil
		}}, tel)

	pub := stream.NewPublisher(rdb, tel)
	ctx, root := tp.Tracer("test").Start(context.Background(), "poll")
	a, b := slot("a", "19:00"), slot("b", "19:30")
	var msgs []*stream.Message
	m := NewModel()
	var want []Transition
	for si, scope := range []string{"src-1|v1|2025-07-04|2|", "src-1|v2|2025-07-04|2|"} {
		snaps := []avail.Snapshot{
			snapOf(scope, 1, 2, a, b), snapOf(scope, 2, 2, a, b), snapOf(scope, 3, 2, a),
			snapOf(scope, 3, 2, a), // replay
			snapOf(scope, 4, 2, a),
		}
		for _, s := range snaps {
			s.RunID += "-" + strconv.Itoa(si) // run ids are unique per poll of a scope
			body, _ := json.Marshal(s)
			msgs = append(msgs, stream.NewMessage(scope, avail.TypeSnapshot, body))
			_, ts, _ := m.Apply(s, "")
			want = append(want, ts...)
		}
	}
	if err := pub.Publish(ctx, topics.Snapshots, msgs...); err != nil {
		t.Fatal(err)
	}
	root.End()
	testenv.WaitFor(t, waitTimeout, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= len(want)
	}, "want %d transitions", len(want))

	mu.Lock()
	defer mu.Unlock()
	var gotTs []Transition
	for _, r := range got {
		if r.traceID != root.SpanContext().TraceID() {
			t.Errorf("transition %s read in trace %s, want the poll's %s", r.tr.EventID, r.traceID, root.SpanContext().TraceID())
		}
		if r.tr.TraceID != root.SpanContext().TraceID().String() {
			t.Errorf("transition %s trace_id %q, want %s", r.tr.EventID, r.tr.TraceID, root.SpanContext().TraceID())
		}
		r.tr.TraceID = "" // the model ran without one
		gotTs = append(gotTs, r.tr)
	}
	sameTransitions(t, "stage", gotTs, want)
	for _, scope := range []string{"src-1|v1|2025-07-04|2|", "src-1|v2|2025-07-04|2|"} {
		var applied []bool
		for _, r := range runsOf(t, rdb, topics, scope) {
			applied = append(applied, r.Applied)
		}
		if want := []bool{true, true, true, false, true}; !slices.Equal(applied, want) {
			t.Errorf("scope %s: run records applied %v, want %v", scope, applied, want)
		}
	}
}

// testStageDeadLetters checks that messages no retry can fix go to the
// dead-letter stream with a clear reason, and good ones still pass.
func testStageDeadLetters(t *testing.T, rdb redis.UniversalClient) {
	topics := avail.NewTopics(1)
	tel := stream.Telemetry{Logger: quiet}
	stage := NewStage(rdb, topics, tel)
	stage.Config = fastConfig()
	startStage(t, rdb, stage, tel)
	enc := func(s avail.Snapshot) []byte { b, _ := json.Marshal(s); return b }
	good := snapOf("s", 1, 2, slot("a", "19:00"))
	noRun := good
	noRun.RunID = ""
	badK := good
	badK.Stabilization = 11
	badKey := snapOf("s", 1, 2, avail.Entity{Key: "resy|v|2025-07-04|19:00"})
	cases := []struct {
		msg    *stream.Message
		reason string
	}{
		{stream.NewMessage("s", avail.TypeSnapshot, []byte(`{"run_id":`)), "decode"},
		{stream.NewMessage("s", avail.TypeRawRun, enc(good)), "message type"},
		{stream.NewMessage("other", avail.TypeSnapshot, enc(good)), "differs from message key"},
		{stream.NewMessage("s", avail.TypeSnapshot, enc(noRun)), "run_id is empty"},
		{stream.NewMessage("s", avail.TypeSnapshot, enc(badK)), "stabilization 11"},
		{stream.NewMessage("s", avail.TypeSnapshot, enc(badKey)), "want provider|venue|date|time|party"},
	}
	msgs := []*stream.Message{}
	for _, c := range cases {
		msgs = append(msgs, c.msg)
	}
	msgs = append(msgs, stream.NewMessage("s", avail.TypeSnapshot, enc(good)))
	if err := stream.NewPublisher(rdb, stream.Telemetry{}).Publish(context.Background(), topics.Snapshots, msgs...); err != nil {
		t.Fatal(err)
	}
	var dead []redis.XMessage
	testenv.WaitFor(t, waitTimeout, func() bool {
		dead, _ = rdb.XRange(context.Background(), topics.Snapshots.DeadLetterStream(0), "-", "+").Result()
		return len(dead) >= len(cases)
	}, "want %d dead letters", len(cases))
	for i, c := range cases {
		reason, _ := dead[i].Values["dlq.reason"].(string)
		if !strings.Contains(reason, c.reason) {
			t.Errorf("dead letter %d: reason %q, want it to mention %q", i, reason, c.reason)
		}
	}
	testenv.WaitFor(t, waitTimeout, func() bool { return len(transitionsOf(t, rdb, topics, "s")) == 1 },
		"the good snapshot's transition never appeared")
}

// testStageRedeliveryEmitsNothingTwice simulates a crash after the script
// and before the acknowledgement: the first delivery of every message
// applies it and then fails, so each message is delivered again. The
// replay must append no transition twice and record the run once applied.
func testStageRedeliveryEmitsNothingTwice(t *testing.T, rdb redis.UniversalClient) {
	topics := avail.NewTopics(2)
	tel := stream.Telemetry{Logger: quiet}
	stage := NewStage(rdb, topics, tel)
	stage.Config = fastConfig()
	var mu sync.Mutex
	attempts := map[string]int{}
	apply := stage.BatchHandler
	stage.BatchHandler = func(ctx context.Context, msgs []*stream.Message) error {
		err := apply(ctx, msgs)
		mu.Lock()
		defer mu.Unlock()
		errs := make([]error, len(msgs))
		for i, m := range msgs {
			attempts[m.ID]++
			errs[i] = err
			if err == nil && m.Attempt == 1 {
				errs[i] = errors.New("crash before the ack")
			}
		}
		return &stream.BatchError{Errs: errs}
	}
	startStage(t, rdb, stage, tel)
	m := NewModel()
	var want []Transition
	var msgs []*stream.Message
	for i, ents := range [][]avail.Entity{{slot("a", "19:00")}, {slot("a", "19:00")}, nil, nil} {
		s := snapOf("s", i+1, 2, ents...)
		_, ts, _ := m.Apply(s, "")
		want = append(want, ts...)
		body, _ := json.Marshal(s)
		msgs = append(msgs, stream.NewMessage("s", avail.TypeSnapshot, body))
	}
	if err := stream.NewPublisher(rdb, tel).Publish(context.Background(), topics.Snapshots, msgs...); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, waitTimeout, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			if attempts[m.ID] < 2 {
				return false
			}
		}
		return true
	}, "want every snapshot applied, then replayed")
	got := transitionsOf(t, rdb, topics, "s")
	for i := range got {
		got[i].TraceID = ""
	}
	sameTransitions(t, "after redelivery", got, want)
	runs := runsOf(t, rdb, topics, "s")
	if len(runs) != 2*len(msgs) {
		t.Errorf("%d run records, want %d (each snapshot applied, then replayed)", len(runs), 2*len(msgs))
	}
	applied := 0
	for _, r := range runs {
		if r.Applied {
			applied++
		}
	}
	if applied != len(msgs) {
		t.Errorf("%d run records applied, want %d (one per snapshot)", applied, len(msgs))
	}
	mu.Lock()
	defer mu.Unlock()
	for id, n := range attempts {
		if n != 2 {
			t.Errorf("message %s handled %d times, want 2", id, n)
		}
	}
}

// TestStage_redisErrorFailsTheBatchRetryably calls the batch handler with
// Redis gone: the valid snapshots fail retryably (they stay pending), the
// invalid one is still dead-lettered.
func TestStage_redisErrorFailsTheBatchRetryably(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	mr.Close()
	stage := NewStage(rdb, avail.NewTopics(1), stream.Telemetry{Logger: quiet})
	enc := func(s avail.Snapshot) []byte { b, _ := json.Marshal(s); return b }
	msgs := []*stream.Message{
		stream.NewMessage("s", avail.TypeSnapshot, enc(snapOf("s", 1, 2, slot("a", "19:00")))),
		stream.NewMessage("s", avail.TypeSnapshot, []byte(`{"run_id":`)),
		stream.NewMessage("s", avail.TypeSnapshot, enc(snapOf("s", 2, 2))),
	}
	err := stage.BatchHandler(context.Background(), msgs)
	var be *stream.BatchError
	if !errors.As(err, &be) || len(be.Errs) != len(msgs) {
		t.Fatalf("handler = %v, want a *stream.BatchError for %d messages", err, len(msgs))
	}
	for i, want := range []stream.Outcome{stream.OutcomeFailed, stream.OutcomeDeadLettered, stream.OutcomeFailed} {
		if got := stream.Classify(be.Errs[i]); got != want {
			t.Errorf("message %d: %s (%v), want %s", i, got, be.Errs[i], want)
		}
	}
}

// loadMidPipeline makes the server cache the diff script in the middle of
// the first pipeline of several commands, as another client loading it
// concurrently would: the commands before it get NOSCRIPT, those after it
// run.
type loadMidPipeline struct {
	once sync.Once
}

func (h *loadMidPipeline) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *loadMidPipeline) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *loadMidPipeline) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) < 2 {
			return next(ctx, cmds)
		}
		injected := false
		h.once.Do(func() { injected = true })
		if !injected {
			return next(ctx, cmds)
		}
		with := append([]redis.Cmder{cmds[0], redis.NewStringCmd(ctx, "script", "load", luaSource)}, cmds[1:]...)
		return next(ctx, with)
	}
}

// TestStage_keepsEachScopesOrderWhenTheScriptIsLoadedMidPipeline: a batch
// holding several snapshots of a scope must apply them in order even when
// some of its scripts get NOSCRIPT and others run.
func TestStage_keepsEachScopesOrderWhenTheScriptIsLoadedMidPipeline(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	t.Cleanup(func() { rdb.Close() })
	rdb.AddHook(&loadMidPipeline{})
	topics := avail.NewTopics(1)
	stage := NewStage(rdb, topics, stream.Telemetry{Logger: quiet})
	a, b := slot("a", "19:00"), slot("b", "19:30")
	snaps := []avail.Snapshot{snapOf("s", 1, 1, a), snapOf("other", 1, 1, b), snapOf("s", 2, 1, a, b), snapOf("s", 3, 1, b)}
	m := NewModel()
	var want []Transition
	var msgs []*stream.Message
	for _, s := range snaps {
		body, _ := json.Marshal(s)
		msgs = append(msgs, stream.NewMessage(s.ScopeKey, avail.TypeSnapshot, body))
		if s.ScopeKey == "s" {
			_, ts, _ := m.Apply(s, "")
			want = append(want, ts...)
		}
	}
	if err := stage.BatchHandler(context.Background(), msgs); err != nil {
		t.Fatalf("handler: %v", err)
	}
	got := transitionsOf(t, rdb, topics, "s")
	for i := range got {
		got[i].TraceID = ""
	}
	sameTransitions(t, "scope s", got, want)
	for _, r := range runsOf(t, rdb, topics, "s") {
		if !r.Applied {
			t.Errorf("run %s of scope s not applied: applied out of order", r.RunID)
		}
	}
}
