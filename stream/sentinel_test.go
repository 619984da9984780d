package stream_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/script"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

func TestParseSentinelURL_forms(t *testing.T) {
	for _, tc := range []struct {
		name, url string
		check     func(*redis.FailoverOptions) string
		wantErr   string
	}{
		{name: "sentinels and master", url: "redis-sentinel://10.0.0.1:26379,10.0.0.2:26379,[::1]:26380/orders",
			check: func(o *redis.FailoverOptions) string {
				if o.MasterName != "orders" || strings.Join(o.SentinelAddrs, " ") != "10.0.0.1:26379 10.0.0.2:26379 [::1]:26380" ||
					o.DB != 0 || o.Password != "" || o.SentinelPassword != "" {
					return "got " + o.MasterName + " " + strings.Join(o.SentinelAddrs, " ")
				}
				return ""
			}},
		{name: "credentials, database and options", url: "redis-sentinel://app:s3cr%2Ft@h1:1,h2:2/m?db=3&sentinel_password=sp&pool_size=10&dial_timeout=2s",
			check: func(o *redis.FailoverOptions) string {
				if o.Username != "app" || o.Password != "s3cr/t" || o.SentinelPassword != "sp" || o.SentinelUsername != "" ||
					o.DB != 3 || o.PoolSize != 10 || o.DialTimeout != 2*time.Second || o.MasterName != "m" {
					return "options not as the URL says"
				}
				return ""
			}},
		{name: "password only", url: "redis-sentinel://:pw@h1:1/m",
			check: func(o *redis.FailoverOptions) string {
				if o.Username != "" || o.Password != "pw" {
					return "got user " + o.Username
				}
				return ""
			}},
		{name: "no master", url: "redis-sentinel://h1:1", wantErr: "master name"},
		{name: "nested path", url: "redis-sentinel://h1:1/m/0", wantErr: "master name"},
		{name: "no port", url: "redis-sentinel://h1/m", wantErr: "sentinel address 1"},
		{name: "empty address", url: "redis-sentinel://h1:1,/m", wantErr: "sentinel address 2"},
		{name: "replica reads", url: "redis-sentinel://h1:1/m?replica_only=true", wantErr: "replica_only not allowed"},
		{name: "master in the query", url: "redis-sentinel://h1:1/m?master_name=x", wantErr: "master_name not allowed"},
		{name: "password in the query", url: "redis-sentinel://h1:1/m?password=x", wantErr: "password not allowed"},
		{name: "unknown option", url: "redis-sentinel://:hunter2@h1:1/m?frobnicate=1", wantErr: "unexpected option: frobnicate"},
		{name: "bad database", url: "redis-sentinel://:hunter2@h1:1/m?db=x", wantErr: "invalid database"},
		{name: "other scheme", url: "redis://h1:1/0", wantErr: "want redis-sentinel://"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := stream.ParseSentinelURL(tc.url)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "hunter2") {
					t.Errorf("error %q shows the password", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if why := tc.check(o); why != "" {
				t.Error(why)
			}
		})
	}
}

func TestParseReplicaWait_forms(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    stream.ReplicaWait
		wantErr string
	}{
		{in: "", want: stream.ReplicaWait{}},
		{in: "off", want: stream.ReplicaWait{}},
		{in: "0/1s", want: stream.ReplicaWait{}},
		{in: "1/500ms", want: stream.ReplicaWait{Replicas: 1, Timeout: 500 * time.Millisecond}},
		{in: " 2/2s ", want: stream.ReplicaWait{Replicas: 2, Timeout: 2 * time.Second}},
		{in: "1", wantErr: "want off or REPLICAS/TIMEOUT"},
		{in: "one/1s", wantErr: "want off or REPLICAS/TIMEOUT"},
		{in: "1/soon", wantErr: "timeout"},
		{in: "1/0s", wantErr: "out of range 1ms..2s"},
		{in: "1/3s", wantErr: "out of range 1ms..2s"},
		{in: "17/1s", wantErr: "out of range 0..16"},
		{in: "-1/1s", wantErr: "replicas -1 out of range 0..16"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := stream.ParseReplicaWait(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseReplicaWait(%q) = %v, %v; want an error containing %q", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseReplicaWait(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
			if back, err := stream.ParseReplicaWait(got.String()); err != nil || back != got {
				t.Errorf("String() %q reads back as %v, %v", got.String(), back, err)
			}
		})
	}
}

// incrScript increments a key: a write whose reply carries its value.
var incrScript = script.New(`return redis.call('INCR', KEYS[1])`)

// TestReplicaWait_answersOnlyWhatTheReplicaHolds writes through a replica
// wait of one replica: a write it confirms is on the replica at once;
// with the replica frozen the write is applied on the primary but fails
// as not replicated (unavailable: a 503), also when the confirmation goes
// on a connection that wrote nothing itself.
func TestReplicaWait_answersOnlyWhatTheReplicaHolds(t *testing.T) {
	ctx := context.Background()
	set := testenv.StartRedisSentinel(t, testenv.RedisSentinelConfig{})
	rdb, err := stream.Dial(ctx, set.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	replica := redis.NewClient(&redis.Options{Addr: set.Node(1).Addr()})
	t.Cleanup(func() { _ = replica.Close() })
	w := stream.ReplicaWait{Replicas: 1, Timeout: 300 * time.Millisecond}

	write := func(key, v string) func(redis.Pipeliner) {
		return func(p redis.Pipeliner) { p.Set(ctx, key, v, 0) }
	}
	if err := w.Exec(ctx, rdb, write("a", "1")); err != nil {
		t.Fatalf("write with the replica in sync: %v", err)
	}
	if got, err := replica.Get(ctx, "a").Result(); got != "1" {
		t.Fatalf("replica holds a=%q (%v) once the write was confirmed, want 1", got, err)
	}
	if err := incrScript.Run(ctx, rdb, []string{"n"}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// NOSCRIPT: the call runs alone, then is confirmed.
	if n, err := w.RunScript(ctx, rdb, incrScript, []string{"n"}).Int64(); err != nil || n != 2 {
		t.Fatalf("script after a flush of the script cache = %d, %v; want 2, nil", n, err)
	}
	if got, _ := replica.Get(ctx, "n").Result(); got != "2" {
		t.Fatalf("replica holds n=%q once the script's write was confirmed, want 2", got)
	}

	set.Node(1).Freeze(t)
	err = w.Exec(ctx, rdb, write("b", "1"))
	if !errors.Is(err, stream.ErrNotReplicated) || !stream.IsUnavailable(err) {
		t.Fatalf("write with the replica frozen: %v; want ErrNotReplicated, unavailable", err)
	}
	if got, _ := rdb.Get(ctx, "b").Result(); got != "1" {
		t.Errorf("primary holds b=%q: the unconfirmed write should be applied there", got)
	}
	if _, err := w.RunScript(ctx, rdb, incrScript, []string{"n"}).Int64(); !errors.Is(err, stream.ErrNotReplicated) {
		t.Errorf("script with the replica frozen: %v; want ErrNotReplicated", err)
	}
	// A connection that wrote nothing: the confirmation still covers
	// the writes other connections made.
	fresh := redis.NewClient(&redis.Options{Addr: set.Node(0).Addr()})
	t.Cleanup(func() { _ = fresh.Close() })
	if err := w.Confirm(ctx, fresh); !errors.Is(err, stream.ErrNotReplicated) {
		t.Errorf("confirm on a connection that wrote nothing, replica frozen: %v; want ErrNotReplicated", err)
	}
	if err := (stream.ReplicaWait{}).Confirm(ctx, fresh); err != nil {
		t.Errorf("confirm with the wait off: %v; want nil at once", err)
	}

	set.Node(1).Resume()
	testenv.WaitFor(t, 10*time.Second, func() bool { return w.Confirm(ctx, rdb) == nil }, "replica confirms again once resumed")
	if got, _ := replica.Get(ctx, "b").Result(); got != "1" {
		t.Errorf("replica holds b=%q once it confirmed, want 1", got)
	}
}

// TestRunner_SentinelFailover_readsFollowThePrimary runs a stage through a
// redis-sentinel:// client, kills the primary with SIGKILL, and publishes
// again once Sentinel promoted the replica: the stage handles the new
// messages, so its reads reach the new primary.
func TestRunner_SentinelFailover_readsFollowThePrimary(t *testing.T) {
	ctx := context.Background()
	set := testenv.StartRedisSentinel(t, testenv.RedisSentinelConfig{})
	rdb, err := stream.Dial(ctx, set.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	topic := stream.NewTopic("failover", "events", 4)
	var mu sync.Mutex
	handled := map[string]bool{}
	r, err := stream.NewRunner(rdb, stream.Stage{Name: "failover", Topic: topic,
		Config: stream.RunnerConfig{Block: 100 * time.Millisecond, ErrorBackoff: 200 * time.Millisecond},
		Handler: func(_ context.Context, m *stream.Message) error {
			mu.Lock()
			handled[string(m.Payload)] = true
			mu.Unlock()
			return nil
		}}, stream.Telemetry{})
	if err != nil {
		t.Fatal(err)
	}
	runInBackground(t, r)
	pub := stream.NewPublisher(rdb, stream.Telemetry{})
	publish := func(from, n int) {
		t.Helper()
		msgs := make([]*stream.Message, n)
		for i := range msgs {
			msgs[i] = stream.NewMessage("k"+strconv.Itoa(from+i), "e", []byte(strconv.Itoa(from+i)))
		}
		// Until the client meets the dead primary's connections and asks
		// the Sentinels again, a publish may fail: try again.
		testenv.WaitFor(t, 20*time.Second, func() bool { return pub.Publish(ctx, topic, msgs...) == nil }, "publish")
	}
	count := func(from, n int) int {
		mu.Lock()
		defer mu.Unlock()
		c := 0
		for i := from; i < from+n; i++ {
			if handled[strconv.Itoa(i)] {
				c++
			}
		}
		return c
	}
	const n = 200
	publish(0, n)
	testenv.WaitFor(t, 20*time.Second, func() bool { return count(0, n) == n }, "messages before the failover handled")
	set.Node(0).Kill()
	if p := set.WaitFailover(t, 0); p != 1 {
		t.Fatalf("sentinels promoted node %d, want the replica 1", p)
	}
	publish(n, n)
	testenv.WaitFor(t, 30*time.Second, func() bool { return count(n, n) == n }, "messages after the failover handled")
}
