package stream

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/dropstream/dropstream/internal/testenv"
)

// TestLease_embeddedClockPastTheLeaseStopsNoRunner: 50 copies in one
// process on the embedded Redis, each under a name of its own, see the
// embedded clock jump past their leases (as one slow aging step does on a
// loaded machine): each takes its lease again, none stops, and every
// message published after is handled exactly once.
func TestLease_embeddedClockPastTheLeaseStopsNoRunner(t *testing.T) {
	e, err := StartEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	rdb := testenv.Dial(t, e.URL())
	topic := NewTopic("lease"+randomSuffix(), "events", 1)
	const copies, n = 50, 200
	lease := 5 * time.Second
	cfg := RunnerConfig{ConsumerLease: lease, BatchSize: 50, Block: 500 * time.Millisecond, ClaimInterval: time.Second,
		ClaimIdle:      time.Minute, // no claim on a starved machine: only the leases are under test
		HandlerTimeout: time.Second, StatsInterval: time.Second, ControlInterval: time.Second,
		ErrorBackoff: 100 * time.Millisecond, Retry: RetryConfig{Disabled: true}}
	var mu sync.Mutex
	seen := map[string]int{}
	stage := Stage{Name: "many", Topic: topic, Config: cfg, Handler: func(_ context.Context, m *Message) error {
		mu.Lock()
		defer mu.Unlock()
		seen[string(m.Payload)]++
		return nil
	}}
	runCtx, stop := context.WithCancel(ctx)
	runners := make([]*Runner, copies)
	done := make(chan error, copies)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	for i := range runners {
		r, err := NewRunner(rdb, stage, Telemetry{})
		if err != nil {
			t.Fatal(err)
		}
		runners[i] = r
		wg.Go(func() { done <- r.Run(runCtx) })
	}
	for _, r := range runners {
		select {
		case <-r.Started():
		case err := <-done:
			t.Fatalf("a copy did not start: %v", err)
		}
	}
	e.srv.FastForward(2 * lease) // every lease is gone now
	retaken := make([]bool, copies)
	testenv.WaitFor(t, 30*time.Second, func() bool {
		all := true
		for i, r := range runners {
			retaken[i] = retaken[i] || rdb.Get(ctx, r.lease.Load().key).Val() == r.lease.Load().token
			all = all && retaken[i]
		}
		return all
	}, "every copy took its expired lease again")
	pub := NewPublisher(rdb, Telemetry{})
	for i := range n {
		// One at a time: 50 blocked reads make each command of the
		// embedded Redis slow, a large pipeline slower than a client waits.
		if err := pub.Publish(ctx, topic, NewMessage("k"+strconv.Itoa(i%31), "test.event", []byte(strconv.Itoa(i)))); err != nil {
			t.Fatal(err)
		}
	}
	testenv.WaitFor(t, 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == n
	}, "every message handled")
	select {
	case err := <-done:
		t.Fatalf("a copy stopped after its lease expired: Run = %v", err)
	default:
	}
	for i, r := range runners {
		if err := r.LeaseErr(); err != nil {
			t.Errorf("copy %d: LeaseErr = %v", i, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for p, c := range seen {
		if c != 1 {
			t.Errorf("payload %s handled %d times", p, c)
		}
	}
}
