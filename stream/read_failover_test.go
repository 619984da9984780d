package stream_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// runInBackground runs r until the test ends, then waits for it to stop.
func runInBackground(t *testing.T, r *stream.Runner) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// TestRunner_acksSurviveAFlushedScriptCache flushes the server's scripts
// while a stage runs: the acknowledgements that go with its next reads
// (EVALSHA of the ack script) meet NOSCRIPT, and must still land, or the
// messages would stay pending and be handled again once claimable.
func TestRunner_acksSurviveAFlushedScriptCache(t *testing.T) {
	for _, b := range testenv.PrivateBackends() {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			rdb := b.Client(t)
			topic := stream.NewTopic("flush"+strconv.FormatInt(time.Now().UnixNano(), 36), "events", 2)
			var mu sync.Mutex
			handled := map[string]int{}
			count := func() (distinct, total int) {
				mu.Lock()
				defer mu.Unlock()
				for _, n := range handled {
					total += n
				}
				return len(handled), total
			}
			r, err := stream.NewRunner(rdb, stream.Stage{Name: "flush", Topic: topic,
				Config: stream.RunnerConfig{BatchSize: 50, Block: 50 * time.Millisecond, ClaimInterval: 25 * time.Millisecond,
					ClaimIdle: 300 * time.Millisecond, HandlerTimeout: 250 * time.Millisecond, Retry: stream.RetryConfig{Disabled: true}},
				Handler: func(_ context.Context, m *stream.Message) error {
					mu.Lock()
					handled[string(m.Payload)]++
					mu.Unlock()
					return nil
				}}, stream.Telemetry{})
			if err != nil {
				t.Fatal(err)
			}
			runInBackground(t, r)
			pub := stream.NewPublisher(rdb, stream.Telemetry{})
			publish := func(from, n int) {
				msgs := make([]*stream.Message, n)
				for i := range msgs {
					msgs[i] = stream.NewMessage("k"+strconv.Itoa((from+i)%7), "e", []byte(strconv.Itoa(from+i)))
				}
				if err := pub.Publish(ctx, topic, msgs...); err != nil {
					t.Fatal(err)
				}
			}
			const n = 300
			publish(0, n)
			testenv.WaitFor(t, 20*time.Second, func() bool { d, _ := count(); return d == n }, "first messages not handled")
			if err := rdb.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			publish(n, n)
			testenv.WaitFor(t, 20*time.Second, func() bool { d, _ := count(); return d == 2*n }, "messages after the flush not handled")
			testenv.WaitFor(t, 20*time.Second, func() bool {
				pending := int64(0)
				for p := 0; p < topic.Partitions; p++ {
					info, err := rdb.XPending(ctx, topic.Stream(p), "flush").Result()
					if err != nil {
						return false
					}
					pending += info.Count
				}
				return pending == 0
			}, "messages still pending after the flush")
			// Nothing pending means every ack landed, or a lost one's
			// message came back and was handled again: counted here.
			if d, total := count(); d != 2*n || total != 2*n {
				t.Fatalf("handled %d messages %d times, want %d once each", d, total, 2*n)
			}
		})
	}
}

// TestRunner_readFollowsAFailover points a client's address at a server
// that then becomes a replica, as a name can for a while after a failover:
// the read meets READONLY, dials again, reaches the new master once the
// name moves, and handles what is published there.
func TestRunner_readFollowsAFailover(t *testing.T) {
	ctx := context.Background()
	oldMaster, newMaster := testenv.StartRedis(t, testenv.RedisConfig{}), testenv.StartRedis(t, testenv.RedisConfig{})
	var target atomic.Value
	target.Store(oldMaster.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: "redis.example:6379",
		Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, target.Load().(string))
		}})
	t.Cleanup(func() { _ = rdb.Close() })
	topic := stream.NewTopic("failover", "events", 1)
	var handled atomic.Int64
	r, err := stream.NewRunner(rdb, stream.Stage{Name: "failover", Topic: topic,
		Config: stream.RunnerConfig{Block: 50 * time.Millisecond, ErrorBackoff: 100 * time.Millisecond},
		Handler: func(context.Context, *stream.Message) error {
			handled.Add(1)
			return nil
		}}, stream.Telemetry{})
	if err != nil {
		t.Fatal(err)
	}
	runInBackground(t, r)
	publish := func(c redis.UniversalClient) {
		msgs := []*stream.Message{stream.NewMessage("k", "e", []byte("1")), stream.NewMessage("k", "e", []byte("2"))}
		if err := stream.NewPublisher(c, stream.Telemetry{}).Publish(ctx, topic, msgs...); err != nil {
			t.Fatal(err)
		}
	}
	publish(rdb)
	testenv.WaitFor(t, 20*time.Second, func() bool { return handled.Load() == 2 }, "not handled on the first master")

	promoted := testenv.Dial(t, newMaster.URL())
	if err := stream.EnsureGroups(ctx, promoted, topic, "failover"); err != nil {
		t.Fatal(err)
	}
	// The old master turns replica (closing its clients) while the name
	// still points at it: the runner dials it again and its reads meet
	// READONLY. Only then does the name move.
	old := testenv.Dial(t, oldMaster.URL())
	host, port, _ := net.SplitHostPort(newMaster.Addr())
	if err := old.SlaveOf(ctx, host, port).Err(); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 20*time.Second, func() bool {
		clients, err := old.ClientList(ctx).Result()
		return err == nil && strings.Contains(clients, "cmd=xreadgroup")
	}, "the runner never read from the old master turned replica")
	target.Store(newMaster.Addr())
	publish(promoted)
	testenv.WaitFor(t, 20*time.Second, func() bool { return handled.Load() == 4 }, "not handled on the new master: %d", handled.Load())
}
