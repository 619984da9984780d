package diff

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/internal/testenv"
)

// TestScript_sameOnEveryRedis runs the script suite against embedded
// miniredis and a real redis-server: every behaviour must be the same on
// both.
func TestScript_sameOnEveryRedis(t *testing.T) {
	tests := []struct {
		name string
		fn   func(t *testing.T, rdb redis.UniversalClient)
	}{
		{"Apply_scenarios", testScenarios},
		{"Apply_payloadsDecode", testPayloadsDecode},
		{"Apply_entityArgumentForms", testEntityArgumentForms},
		{"Apply_eventIDsMatchGo", testEventIDsMatchGo},
		{"Apply_withoutTraceparent", testWithoutTraceparent},
		{"Apply_matchesModelOnRandomSequences", testMatchesModel},
		{"Apply_guardMatchesModelOnRandomSequences", testGuardMatchesModel},
		{"Apply_perVenueMatchesModelOnRandomSequences", testPerVenueMatchesModel},
		{"Apply_largeSnapshot", testLargeSnapshot},
		{"Apply_adoptsLegacyOpenSet", testAdoptsLegacyOpenSet},
		{"Apply_rejectsInvalid", testApplyRejectsInvalid},
		{"ApplyBatch_matchesModel", testBatchMatchesModel},
		{"Stage_endToEnd", testStageEndToEnd},
		{"Stage_deadLettersInvalid", testStageDeadLetters},
		{"Stage_redeliveryEmitsNothingTwice", testStageRedeliveryEmitsNothingTwice},
	}
	for _, b := range backends() {
		for _, tc := range tests {
			t.Run(b.name+"/"+tc.name, func(t *testing.T) { tc.fn(t, b.client(t)) })
		}
	}
}

// scriptApplier applies through Apply and returns the transitions the call
// appended; it also plays the model and checks the run record.
func scriptApplier(rdb redis.UniversalClient, topics avail.Topics, scope string, m *Model) applyFunc {
	seen, seenAlone, seenWith := 0, 0, 0
	return func(t *testing.T, snap avail.Snapshot) (Result, []Transition) {
		t.Helper()
		res, err := Apply(context.Background(), rdb, topics, snap, testTraceParent)
		if err != nil {
			t.Fatalf("apply %s: %v", snap.RunID, err)
		}
		wantRes, wantTs, wantRec := m.Apply(snap, testTraceID)
		if res != wantRes {
			t.Errorf("apply %s: result %+v, model %+v", snap.RunID, res, wantRes)
		}
		all := transitionsOf(t, rdb, topics, scope)
		got := all[seen:]
		seen = len(all)
		sameTransitions(t, "run "+snap.RunID, got, wantTs)
		alone, with := runSources(t, rdb, topics, scope)
		newAlone, newWith := alone[seenAlone:], with[seenWith:]
		seenAlone, seenWith = len(alone), len(with)
		var rec avail.RunRecord
		switch {
		case len(got) > 0 && len(newWith) == 1 && len(newAlone) == 0:
			rec = newWith[0]
		case len(got) == 0 && len(newAlone) == 1 && len(newWith) == 0:
			rec = newAlone[0]
		default:
			t.Fatalf("apply %s: %d transitions, new run records %+v alone and %+v with transitions; want one, with them exactly when there are some",
				snap.RunID, len(got), newAlone, newWith)
		}
		if !reflect.DeepEqual(normRun(rec), normRun(wantRec)) {
			t.Errorf("run record of %s:\n got %+v\nwant %+v", snap.RunID, rec, wantRec)
		}
		return res, got
	}
}

func testScenarios(t *testing.T, rdb redis.UniversalClient) {
	topics := avail.NewTopics(4)
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			scope := "scope-" + sc.name
			m := NewModel()
			runScenario(t, sc, scope, scriptApplier(rdb, topics, scope, m))
			checkState(t, rdb, topics, m, scope)
		})
	}
}

// checkState compares a scope's state in Redis with the model's.
func checkState(t *testing.T, rdb redis.UniversalClient, topics avail.Topics, m *Model, scope string) {
	t.Helper()
	got, err := ReadState(context.Background(), rdb, topics, scope)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := normState(got), normState(m.State(scope)); !reflect.DeepEqual(g, w) {
		t.Errorf("state of %s:\n got %+v\nwant %+v", scope, g, w)
	}
}

func testLargeSnapshot(t *testing.T, rdb redis.UniversalClient) {
	const n = 2500 // more than the script's 1000-argument chunks
	topics := avail.NewTopics(2)
	ents := make([]avail.Entity, n)
	for i := range ents {
		ents[i] = slot(fmt.Sprintf("v%05d", i), "20:30")
	}
	m := NewModel()
	steps := []struct {
		snap avail.Snapshot
		want Result
	}{
		{snapOf("big", 1, 2, ents...), Result{Applied: true, Opened: n}},
		{snapOf("big", 2, 2, ents...), Result{Applied: true, StableOpened: n}},
		{snapOf("big", 3, 2, ents[:n/2]...), Result{Applied: true, Closed: n - n/2}},
		{snapOf("big", 4, 2), Result{Applied: true, Closed: n / 2, StableClosed: n - n/2}},
	}
	total := 0
	for i, s := range steps {
		total += s.want.Opened + s.want.Closed + s.want.StableOpened + s.want.StableClosed
		res, err := Apply(context.Background(), rdb, topics, s.snap, "")
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if res != s.want {
			t.Errorf("step %d: %+v, want %+v", i, res, s.want)
		}
		m.Apply(s.snap, "")
	}
	checkState(t, rdb, topics, m, "big")
	if got := len(transitionsOf(t, rdb, topics, "big")); got != total {
		t.Errorf("%d transitions, want %d", got, total)
	}
}

func testApplyRejectsInvalid(t *testing.T, rdb redis.UniversalClient) {
	topics := avail.NewTopics(2)
	bad := snapOf("s", 1, 11, slot("a", "19:00"))
	_, err := Apply(context.Background(), rdb, topics, bad, "")
	if !errors.Is(err, ErrInvalidSnapshot) {
		t.Fatalf("apply with stabilization 11: %v, want ErrInvalidSnapshot", err)
	}
	_, err = ApplyBatch(context.Background(), rdb, topics, []Input{{Snapshot: snapOf("s", 1, 2)}, {Snapshot: bad}})
	if !errors.Is(err, ErrInvalidSnapshot) {
		t.Fatalf("batch with an invalid snapshot: %v, want ErrInvalidSnapshot", err)
	}
	if n, err := rdb.DBSize(context.Background()).Result(); err != nil || n != 0 {
		t.Fatalf("keys after rejected applies: %d (%v), want none", n, err)
	}
	mixed := avail.Topics{Snapshots: topics.Snapshots, Transitions: topics.Transitions, Runs: avail.NewTopics(3).Runs}
	if _, err := Apply(context.Background(), rdb, mixed, snapOf("s", 1, 2), ""); err == nil {
		t.Fatal("apply with topics of different partition counts succeeded")
	}
}

// TestApplyBatch_reloadsFlushedScript empties the server's script cache
// before a batch: the pipelined EVALSHAs fail with NOSCRIPT, the script is
// loaded and they run. It uses servers of its own, since SCRIPT FLUSH
// would disturb other tests on a shared one.
func TestApplyBatch_reloadsFlushedScript(t *testing.T) {
	private := map[string]func(t *testing.T) redis.UniversalClient{
		"miniredis": backends()[0].client,
		"redis-server": func(t *testing.T) redis.UniversalClient {
			return testenv.Dial(t, testenv.StartRedis(t, testenv.RedisConfig{}).URL())
		},
	}
	for name, client := range private {
		t.Run(name, func(t *testing.T) {
			rdb := client(t)
			topics := avail.NewTopics(2)
			ctx := context.Background()
			if err := rdb.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			res, err := ApplyBatch(ctx, rdb, topics, []Input{
				{Snapshot: snapOf("s", 1, 1, slot("a", "19:00"))},
				{Snapshot: snapOf("s", 2, 1)},
				{Snapshot: snapOf("s", 2, 1)},
			})
			if err != nil {
				t.Fatal(err)
			}
			want := []Result{{Applied: true, Opened: 1, StableOpened: 1}, {Applied: true, Closed: 1, StableClosed: 1}, {}}
			if !reflect.DeepEqual(res, want) {
				t.Fatalf("results %+v, want %+v", res, want)
			}
		})
	}
}
