package stream_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/stream/streamtest"
)

// TestConformance_redisCluster runs the suite against a 3-master Redis
// Cluster, reached through the node list stream.Dial takes.
func TestConformance_redisCluster(t *testing.T) {
	nodes := testenv.RedisClusterURL(t)
	streamtest.Run(t, streamtest.Backend{
		Name:     "redis-cluster",
		Features: streamtest.Features{Cluster: true, IdleTimes: true},
		Client: func(t *testing.T) redis.UniversalClient {
			return dialCluster(t, nodes)
		},
	})
}

func dialCluster(t *testing.T, nodes string) redis.UniversalClient {
	t.Helper()
	rdb, err := stream.Dial(context.Background(), nodes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func TestDial_nodeListGivesClusterClient(t *testing.T) {
	nodes := testenv.RedisClusterURL(t)
	tests := []struct {
		name string
		url  string
	}{
		{name: "as configured", url: nodes},
		{name: "spaces around nodes", url: " " + strings.ReplaceAll(nodes, ",", " , ") + " "},
		{name: "one node of the cluster", url: strings.Split(nodes, ",")[0]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rdb := dialCluster(t, tt.url)
			cc, ok := rdb.(*redis.ClusterClient)
			if !ok {
				t.Fatalf("Dial(%q) gave a %T, want *redis.ClusterClient", tt.url, rdb)
			}
			// The client finds every master, whichever node it was given.
			masters := map[string]bool{}
			err := cc.ForEachMaster(t.Context(), func(ctx context.Context, c *redis.Client) error {
				return c.Ping(ctx).Err()
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range clusterSlots(t, rdb) {
				masters[s.master] = true
			}
			if len(masters) != 3 {
				t.Errorf("client sees %d masters, want 3", len(masters))
			}
		})
	}
}

// slotRange is a range of slots and the master serving it.
type slotRange struct {
	start, end int
	master     string
}

// clusterSlots returns the slot ranges of the cluster (CLUSTER SHARDS).
func clusterSlots(t *testing.T, rdb redis.UniversalClient) []slotRange {
	t.Helper()
	shards, err := rdb.ClusterShards(t.Context()).Result()
	if err != nil {
		t.Fatalf("CLUSTER SHARDS: %v", err)
	}
	var out []slotRange
	for _, sh := range shards {
		for _, n := range sh.Nodes {
			if n.Role != "master" {
				continue
			}
			for _, r := range sh.Slots {
				out = append(out, slotRange{int(r.Start), int(r.End), n.IP + ":" + strconv.FormatInt(n.Port, 10)})
			}
		}
	}
	return out
}

// masterOf returns the address of the master serving key.
func masterOf(t *testing.T, slots []slotRange, key string) string {
	t.Helper()
	slot := testenv.KeySlot(key)
	for _, s := range slots {
		if slot >= s.start && slot <= s.end {
			return s.master
		}
	}
	t.Fatalf("no master serves slot %d of %s", slot, key)
	return ""
}

// TestTopic_partitionsSpreadOverMasters checks, on the live cluster, that
// the partitions of every flow of dropstream land on every master at the
// partition counts a deployment would choose. The flow names are those of
// avail.Flow and flows/*: the hash tag {flow.p} alone decides the slot.
func TestTopic_partitionsSpreadOverMasters(t *testing.T) {
	rdb := dialCluster(t, testenv.RedisClusterURL(t))
	slots := clusterSlots(t, rdb)
	for _, flow := range []string{"avail", "comic", "feed", "checkout", "offer", "sample"} {
		for _, partitions := range []int{4, 8, 16} {
			topic := stream.NewTopic(flow, "events", partitions)
			per := map[string]int{}
			for p := range partitions {
				per[masterOf(t, slots, topic.Stream(p))]++
				if dl := topic.DeadLetterStream(p); masterOf(t, slots, dl) != masterOf(t, slots, topic.Stream(p)) {
					t.Errorf("%s: dead-letter stream of partition %d on another master than the partition", topic, p)
				}
			}
			if len(per) != 3 {
				t.Errorf("flow %s with %d partitions uses %d of 3 masters: %v", flow, partitions, len(per), per)
			}
		}
	}
}

// clusterRunnerConfig redelivers quickly, as the conformance suite does.
func clusterRunnerConfig() stream.RunnerConfig {
	return stream.RunnerConfig{
		BatchSize: 100, Block: 50 * time.Millisecond, ClaimInterval: 50 * time.Millisecond,
		ClaimIdle: time.Second, HandlerTimeout: 400 * time.Millisecond, StatsInterval: time.Minute,
		ErrorBackoff: 100 * time.Millisecond, MaxDeliveries: 1000, Retry: stream.RetryConfig{Disabled: true},
	}
}

// randomFlow returns a flow name of its own for a test on a shared cluster.
func randomFlow() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "c" + hex.EncodeToString(b[:])
}

// handled records which payloads each copy handled.
type handled struct {
	mu     sync.Mutex
	byCopy map[string]map[string]int // consumer → payload → times
	byPart map[int]int               // partition → messages handled
}

func newHandled() *handled {
	return &handled{byCopy: map[string]map[string]int{}, byPart: map[int]int{}}
}

func (h *handled) add(consumer string, m *stream.Message) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byCopy[consumer] == nil {
		h.byCopy[consumer] = map[string]int{}
	}
	h.byCopy[consumer][string(m.Payload)]++
	h.byPart[m.Partition]++
}

// total returns how often each payload was handled, over all copies.
func (h *handled) total() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]int{}
	for _, seen := range h.byCopy {
		for p, n := range seen {
			out[p] += n
		}
	}
	return out
}

// copiesWithWork returns how many copies handled at least one message.
func (h *handled) copiesWithWork() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.byCopy)
}

func (h *handled) partitions(ps []int) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, p := range ps {
		n += h.byPart[p]
	}
	return n
}

// runCopies runs n copies of stage, each under its own consumer name
// "copy-<i>" with the handler handler(name), until the test ends.
func runCopies(t *testing.T, rdb redis.UniversalClient, stage stream.Stage, n int, handler func(consumer string) stream.Handler) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for i := range n {
		s := stage
		s.Config.Consumer = "copy-" + strconv.Itoa(i)
		s.Handler = handler(s.Config.Consumer)
		r, err := stream.NewRunner(rdb, s, stream.Telemetry{})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if err := r.Run(ctx); err != nil {
				t.Errorf("copy %d: %v", i, err)
			}
		})
	}
}

// publish publishes payloads from..from+n-1 with keys spread over the
// partitions and returns the payloads Redis acknowledged (the message got
// an ID). A failed node fails only the messages of its partitions.
func publish(t *testing.T, rdb redis.UniversalClient, topic stream.Topic, from, n int) (acked []string, err error) {
	t.Helper()
	msgs := make([]*stream.Message, 0, n)
	for i := from; i < from+n; i++ {
		msgs = append(msgs, stream.NewMessage("key-"+strconv.Itoa(i), "test.event", []byte(strconv.Itoa(i))))
	}
	err = stream.NewPublisher(rdb, stream.Telemetry{}).Publish(context.Background(), topic, msgs...)
	for _, m := range msgs {
		if m.ID != "" {
			acked = append(acked, string(m.Payload))
		}
	}
	return acked, err
}

func TestStage_copiesShareThePartitionsOfEveryMaster(t *testing.T) {
	rdb := dialCluster(t, testenv.RedisClusterURL(t))
	topic := stream.NewTopic(randomFlow(), "events", 8)
	h := newHandled()
	stage := stream.Stage{Name: "share", Topic: topic, Config: clusterRunnerConfig()}
	runCopies(t, rdb, stage, 2, func(consumer string) stream.Handler {
		return func(_ context.Context, m *stream.Message) error {
			h.add(consumer, m)
			return nil
		}
	})
	// Waves of 2,000 until both copies have handled some: a copy that is
	// still starting when a wave goes out may leave it all to the other.
	const wave, maxWaves = 2000, 5
	n := 0
	for n == 0 || n < maxWaves*wave && h.copiesWithWork() < 2 {
		acked, err := publish(t, rdb, topic, n, wave)
		if err != nil || len(acked) != wave {
			t.Fatalf("publish: %d of %d acknowledged, %v", len(acked), wave, err)
		}
		n += wave
		testenv.WaitFor(t, 30*time.Second, func() bool { return len(h.total()) == n }, "every message handled")
	}
	for p, times := range h.total() {
		if times != 1 {
			t.Errorf("payload %s handled %d times", p, times)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range []string{"copy-0", "copy-1"} {
		if len(h.byCopy[c]) == 0 {
			t.Errorf("%s handled nothing: the copies did not share the work (%d, %d)", c, len(h.byCopy["copy-0"]), len(h.byCopy["copy-1"]))
		}
	}
	slots := clusterSlots(t, rdb)
	masters := map[string]int{}
	for p := range topic.Partitions {
		masters[masterOf(t, slots, topic.Stream(p))] += h.byPart[p]
	}
	if len(masters) != 3 {
		t.Errorf("messages handled from %d masters, want 3: %v", len(masters), masters)
	}
}

// TestCluster_masterKilledMidRun kills one master of a cluster without
// replicas while a stage works, and restarts it from its AOF (fsync
// always): the partitions it serves stall, the others flow on, and once it
// is back every message whose XADD was acknowledged is handled, its effect
// applied exactly once (through a ledger), with nothing left pending.
func TestCluster_masterKilledMidRun(t *testing.T) {
	cl := testenv.StartRedisCluster(t, testenv.RedisClusterConfig{AppendOnly: true, AppendFsync: "always", NodeTimeout: time.Second})
	rdb := dialCluster(t, cl.URL())
	ctx := context.Background()
	const victim = 1

	// A topic whose 6 partitions use every node.
	var topic stream.Topic
	var onVictim, elsewhere []int
	for {
		topic = stream.NewTopic(randomFlow(), "events", 6)
		onVictim, elsewhere = nil, nil
		nodes := map[int]bool{}
		for p := range topic.Partitions {
			n := cl.NodeOfKey(topic.Stream(p))
			nodes[n] = true
			if n == victim {
				onVictim = append(onVictim, p)
			} else {
				elsewhere = append(elsewhere, p)
			}
		}
		if len(nodes) == cl.Len() {
			break
		}
	}

	ledger, err := stream.NewLedger(rdb, stream.LedgerConfig{Name: "count", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	count := stream.NewEffect(`return redis.call('HINCRBY', KEYS[1], ARGV[1], 1)`)
	countsKey := func(p int) string { return "ds:" + topic.HashTag(p) + ":counts" }
	h := newHandled()
	// Calls on the victim's partitions in flight: one that applied its
	// effect just before the kill records it just after.
	var victimCalls atomic.Int64
	stage := stream.Stage{Name: "count", Topic: topic, Config: clusterRunnerConfig()}
	runCopies(t, rdb, stage, 1, func(consumer string) stream.Handler {
		return func(ctx context.Context, m *stream.Message) error {
			if slices.Contains(onVictim, m.Partition) {
				victimCalls.Add(1)
				defer victimCalls.Add(-1)
			}
			tag := topic.HashTag(m.Partition)
			if _, _, err := ledger.Apply(ctx, count, ledger.Key(tag, m.Key), []string{countsKey(m.Partition)}, string(m.Payload)); err != nil {
				return err
			}
			h.add(consumer, m)
			return nil
		}
	})

	partitionOf := func(payload string) int {
		i, _ := strconv.Atoi(payload)
		return topic.Partition("key-" + strconv.Itoa(i))
	}
	want := map[string]bool{}
	acked, err := publish(t, rdb, topic, 0, 3000)
	if err != nil || len(acked) != 3000 {
		t.Fatalf("publish before the kill: %d acknowledged, %v", len(acked), err)
	}
	for _, p := range acked {
		want[p] = true
	}
	testenv.WaitFor(t, 30*time.Second, func() bool { return len(h.total()) >= 300 }, "stage started handling")
	cl.Node(victim).Kill()
	began := time.Now()
	t.Logf("node %d killed with %d of %d messages handled", victim, len(h.total()), len(want))
	// A call begun after the kill cannot apply its effect; once none is in
	// flight, every call begun before it has recorded what it handled.
	testenv.WaitFor(t, 30*time.Second, func() bool { return victimCalls.Load() == 0 },
		"calls on the killed node's partitions begun before the kill returned")
	stalled := h.partitions(onVictim)

	acked, _ = publish(t, rdb, topic, 3000, 600) // the victim's part fails
	for _, p := range acked {
		if slices.Contains(onVictim, partitionOf(p)) {
			t.Fatalf("payload %s acknowledged by a partition of the killed node", p)
		}
		want[p] = true
	}
	wantElsewhere := 0
	for p := range want {
		if !slices.Contains(onVictim, partitionOf(p)) {
			wantElsewhere++
		}
	}
	testenv.WaitFor(t, 30*time.Second, func() bool { return h.partitions(elsewhere) >= wantElsewhere },
		"partitions of the live nodes handled all %d messages while node %d is down", wantElsewhere, victim)
	if got := h.partitions(onVictim); got != stalled {
		t.Errorf("partitions of the killed node handled %d messages while it was down", got-stalled)
	}
	if cl.Node(victim).Running() {
		t.Fatal("the killed node is running")
	}

	t.Logf("live partitions handled their %d messages %v after the kill", wantElsewhere, time.Since(began).Round(time.Millisecond))
	cl.Node(victim).Restart(t)
	t.Logf("node %d restarted %v after the kill", victim, time.Since(began).Round(time.Millisecond))
	testenv.WaitFor(t, 60*time.Second, func() bool {
		total := h.total()
		for p := range want {
			if total[p] == 0 {
				return false
			}
		}
		return true
	}, "every acknowledged message handled after the restart")

	t.Logf("every acknowledged message handled %v after the kill", time.Since(began).Round(time.Millisecond))
	// Exactly the acknowledged payloads were counted, each once.
	counted := map[string]int64{}
	for p := range topic.Partitions {
		m, err := rdb.HGetAll(ctx, countsKey(p)).Result()
		if err != nil {
			t.Fatalf("HGETALL %s: %v", countsKey(p), err)
		}
		for payload, v := range m {
			n, _ := strconv.ParseInt(v, 10, 64)
			counted[payload] += n
		}
	}
	if len(counted) != len(want) {
		t.Errorf("%d payloads counted, %d acknowledged", len(counted), len(want))
	}
	for p := range want {
		if counted[p] != 1 {
			t.Errorf("payload %s counted %d times, want 1", p, counted[p])
		}
	}
	testenv.WaitFor(t, 30*time.Second, func() bool {
		for p := range topic.Partitions {
			sum, err := rdb.XPending(ctx, topic.Stream(p), "count").Result()
			if err != nil || sum.Count != 0 {
				return false
			}
		}
		return true
	}, "nothing pending after the restart")
	if n, err := stream.NewDeadLetters(rdb).Count(ctx, topic); err != nil || n != 0 {
		t.Errorf("dead letters %d, %v; want 0", n, err)
	}
}
