package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/collector"
	"github.com/dropstream/dropstream/collector/simulator"
	"github.com/dropstream/dropstream/flows/sample"
	"github.com/dropstream/dropstream/flows/sample/sampletest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// redisClient returns a client of url closed when the test ends.
func redisClient(t *testing.T, url string) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// countsSummary returns the total of sample.Counts and the counts.
func countsSummary(t *testing.T, rdb redis.UniversalClient, partitions int) (int64, map[string]int64) {
	t.Helper()
	counts, err := sampletest.Counts(context.Background(), rdb, partitions)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, n := range counts {
		total += n
	}
	return total, counts
}

// drained reports whether the group has read every entry of every
// partition of topic and acknowledged them all (XINFO GROUPS of Redis 7).
func drained(t *testing.T, rdb redis.UniversalClient, topic stream.Topic, group string) bool {
	t.Helper()
	for p := 0; p < topic.Partitions; p++ {
		groups, err := rdb.XInfoGroups(context.Background(), topic.Stream(p)).Result()
		if err != nil {
			return false // the stream or group does not exist yet
		}
		found := false
		for _, g := range groups {
			if g.Name == group {
				found = true
				if g.Lag != 0 || g.Pending != 0 {
					return false
				}
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// streamLen sums XLEN over the partitions of topic.
func streamLen(t *testing.T, rdb redis.UniversalClient, topic stream.Topic) int64 {
	t.Helper()
	var n int64
	for p := 0; p < topic.Partitions; p++ {
		l, err := rdb.XLen(context.Background(), topic.Stream(p)).Result()
		if err != nil {
			t.Fatal(err)
		}
		n += l
	}
	return n
}

// publishTicks publishes n ticks over 10 sensors with the sample generator.
func publishTicks(t *testing.T, rdb redis.UniversalClient, partitions int, n int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := sampletest.Generate(ctx, stream.NewPublisher(rdb, stream.Telemetry{}), partitions, 100000, 10, n, nil)
	if err != nil || got != n {
		t.Fatalf("Generate = %d, %v; want %d, nil", got, err, n)
	}
}

// publishSeqs publishes ticks with sequence numbers from..to-1 over 10
// sensors, as sample.Generate would if it continued a previous run.
func publishSeqs(t *testing.T, rdb redis.UniversalClient, partitions int, from, to int64) {
	t.Helper()
	sampleTopics := sample.NewTopics(partitions)
	ticks, _ := sampleTopics.Ticks, sampleTopics.Readings
	msgs := make([]*stream.Message, 0, to-from)
	for seq := from; seq < to; seq++ {
		sensor := fmt.Sprintf("sensor-%d", seq%10)
		body, err := json.Marshal(sample.Tick{Seq: seq, Sensor: sensor, At: time.Now().UTC()})
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, stream.NewMessage(sensor, "sample.tick", body))
	}
	if err := stream.NewPublisher(rdb, stream.Telemetry{}).Publish(context.Background(), ticks, msgs...); err != nil {
		t.Fatal(err)
	}
}

// waitProcessed waits until both sample stages have consumed and
// acknowledged everything, with one reading per tick.
func waitProcessed(t *testing.T, b *background, rdb redis.UniversalClient, partitions int, ticks int64) {
	t.Helper()
	sampleTopics := sample.NewTopics(partitions)
	tickTopic, readingTopic := sampleTopics.Ticks, sampleTopics.Readings
	b.waitFor(t, 30*time.Second, func() bool {
		return streamLen(t, rdb, readingTopic) == ticks && drained(t, rdb, tickTopic, "sample-enrich") &&
			drained(t, rdb, readingTopic, "sample-sink")
	}, fmt.Sprintf("%d ticks enriched and sunk", ticks))
}

func checkCounts(t *testing.T, rdb redis.UniversalClient, partitions int, total, perSensor int64) {
	t.Helper()
	got, counts := countsSummary(t, rdb, partitions)
	if got != total {
		t.Errorf("counted %d readings, want %d: %v", got, total, counts)
	}
	for i := 0; i < 10; i++ {
		if s := fmt.Sprintf("sensor-%d", i); counts[s] != perSensor {
			t.Errorf("%s counted %d times, want %d", s, counts[s], perSensor)
		}
	}
}

func TestRun_processesTicksWithRealRedis(t *testing.T) {
	clearEnv(t)
	url := testenv.RedisURL(t)
	rdb := redisClient(t, url)
	args := []string{"run", "--redis-url", url, "--api-addr", "", "--stages", "sample-enrich,sample-sink", "--partitions", "2"}

	run := startDispatch(t, args...)
	publishTicks(t, rdb, 2, 300)
	run.waitFor(t, 30*time.Second, func() bool {
		total, counts := countsSummary(t, rdb, 2)
		if total != 300 || len(counts) != 10 {
			return false
		}
		for _, n := range counts {
			if n != 30 {
				return false
			}
		}
		return true
	}, "300 readings counted, 30 per sensor")
	waitProcessed(t, run, rdb, 2, 300)
	checkCounts(t, rdb, 2, 300, 30)
	if err := run.stop(t); err != nil {
		t.Fatalf("run returned %v after cancellation, want nil\nstderr:\n%s", err, run.stderr)
	}

	// Restarted with two copies of each stage: each new tick is counted
	// exactly once, whichever copy gets it. The new ticks carry sequence
	// numbers 300..599: a second sample.Generate run would reuse 0..299,
	// which the sink's ledger takes for redeliveries (see
	// TestStages_secondGeneratorRunIsCounted in flows/sample).
	run = startDispatch(t, append(args, "--copies", "2")...)
	publishSeqs(t, rdb, 2, 300, 600)
	waitProcessed(t, run, rdb, 2, 600)
	checkCounts(t, rdb, 2, 600, 60)
	if err := run.stop(t); err != nil {
		t.Fatalf("run --copies 2 returned %v after cancellation, want nil\nstderr:\n%s", err, run.stderr)
	}
	if n := strings.Count(run.stderr.String(), `"msg":"stage started"`); n != 4 {
		t.Errorf("run --copies 2 started %d stage copies, want 4 (2 stages x 2)", n)
	}
}

func TestRun_unknownStageFailsListingKnownOnes(t *testing.T) {
	clearEnv(t) // embedded Redis
	var stdout, stderr syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := dispatch(ctx, []string{"run", "--api-addr", "", "--stages", "sample-enrich,nope"}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), `unknown stage "nope"`) || !strings.Contains(err.Error(), "sample-enrich, sample-sink") {
		t.Fatalf("run --stages sample-enrich,nope = %v, want an unknown stage error listing the known ones", err)
	}
}

// run --list-stages prints every stage with its streams and group, and
// every service, as --stages accepts them, and exits without running them.
func TestRun_listStagesPrintsStagesAndServices(t *testing.T) {
	clearEnv(t) // embedded Redis
	var stdout, stderr syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := dispatch(ctx, []string{"run", "--api-addr", "", "--partitions", "3", "--list-stages"}, &stdout, &stderr); err != nil {
		t.Fatalf("run --list-stages: %v\n%s", err, stderr.String())
	}
	got := map[string]listedStage{}
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		var s listedStage
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		got[s.Name] = s
	}
	want := map[string]listedStage{
		"sample-enrich":    {Name: "sample-enrich", Kind: "stage", Flow: sample.Name, Topic: "ticks", Partitions: 3, Group: "sample-enrich"},
		"avail-collector":  {Name: "avail-collector", Kind: "service"},
		"notifier-expiry":  {Name: "notifier-expiry", Kind: "service"},
		"avail-normalizer": {Name: "avail-normalizer", Kind: "stage", Flow: avail.Flow, Topic: "raw", Partitions: 3, Group: "avail-normalizer"},
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("listed %+v, want %+v", got[name], w)
		}
	}
}

// A stage that cannot start (here its stream key holds a string, so
// XGROUP CREATE fails with WRONGTYPE) must make run fail, not leave the
// process running without that stage.
func TestRun_stageThatCannotStartFailsTheCommand(t *testing.T) {
	clearEnv(t)
	url := testenv.RedisURL(t)
	rdb := redisClient(t, url)
	sampleTopics := sample.NewTopics(1)
	ticks, _ := sampleTopics.Ticks, sampleTopics.Readings
	if err := rdb.Set(context.Background(), ticks.Stream(0), "not a stream", 0).Err(); err != nil {
		t.Fatal(err)
	}
	run := startDispatch(t, "run", "--redis-url", url, "--api-addr", "", "--partitions", "1", "--stages", "sample-enrich")
	select {
	case <-run.done:
		if run.err == nil || !strings.Contains(run.err.Error(), "WRONGTYPE") {
			t.Errorf("run returned %v, want the stage's WRONGTYPE start error", run.err)
		}
	case <-time.After(5 * time.Second):
		failed := strings.Contains(run.stderr.String(), "stage failed")
		err := run.stop(t)
		t.Errorf("run still running 5s after its only stage failed to start (logged %q: %v); after cancellation it returned %v",
			"stage failed", failed, err)
	}
}

// TestRun_sourcesFilePollsTheSimulator starts run with a sources file that
// points at a simulator and only the collector and normalizer stages, and
// checks that the sources are stored and that snapshots of the simulator's
// open slots arrive.
func TestRun_sourcesFilePollsTheSimulator(t *testing.T) {
	clearEnv(t)
	url := testenv.RedisURL(t)
	rdb := redisClient(t, url)
	sim, err := simulator.New(simulator.Config{Seed: 7, Venues: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	simURL, err := sim.Start(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	scope := avail.Scope{Venue: "1001", Date: sim.Config().Dates[0], PartySize: 2}
	file := filepath.Join(t.TempDir(), "sources.json")
	body := fmt.Sprintf(`[{"id":"sim","provider":"simulator","base_url":%q,"interval":"1s","rate_limit":50,
		"scopes":[{"venue":"1001","date":%q,"party_size":2}]}]`, simURL, scope.Date)
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	// The simulator listens on loopback: the app may poll it because the
	// allow list names it.
	t.Setenv("DROPSTREAM_EGRESS_ALLOW", strings.TrimPrefix(simURL, "http://"))
	run := startDispatch(t, "run", "--redis-url", url, "--api-addr", "", "--partitions", "2",
		"--stages", "avail-collector,avail-normalizer", "--sources-file", file)
	topics := avail.NewTopics(2)
	want := sim.Open("simulator", scope)
	run.waitFor(t, 30*time.Second, func() bool {
		xs, err := rdb.XRange(context.Background(), topics.Snapshots.Stream(topics.Snapshots.Partition(scope.Key("sim"))), "-", "+").Result()
		if err != nil || len(xs) == 0 {
			return false
		}
		var snap avail.Snapshot
		payload, _ := xs[0].Values["payload"].(string)
		if json.Unmarshal([]byte(payload), &snap) != nil || !snap.OK || len(snap.Entities) != len(want) {
			return false
		}
		for i, e := range snap.Entities {
			if !slices.Contains(want, e.Key) {
				t.Errorf("snapshot entity %d %s is not open in the simulator", i, e.Key)
			}
		}
		return true
	}, "a snapshot of the simulator's open slots")
	srcs, err := collector.NewStore(rdb).List(context.Background())
	if err != nil || len(srcs) != 1 || srcs[0].ID != "sim" {
		t.Errorf("stored sources = %v, %v; want the file's source", srcs, err)
	}
	if err := run.stop(t); err != nil {
		t.Fatalf("run returned %v", err)
	}
}
