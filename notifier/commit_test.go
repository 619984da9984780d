package notifier

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// writeHook records the ledger keys each transaction sets, and holds the
// first such transaction until release is closed.
type writeHook struct {
	mu      sync.Mutex
	writes  [][]string
	held    chan struct{} // closed once the first write is held
	release chan struct{}
}

func (h *writeHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (h *writeHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *writeHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) == 0 || cmds[0].Name() != "multi" {
			return next(ctx, cmds)
		}
		var keys []string
		for _, c := range cmds {
			if args := c.Args(); c.Name() == "set" && strings.Contains(fmt.Sprint(args[1]), ":ledger:") {
				keys = append(keys, fmt.Sprint(args[1]))
			}
		}
		h.mu.Lock()
		h.writes = append(h.writes, keys)
		first := len(h.writes) == 1
		h.mu.Unlock()
		if first {
			close(h.held)
			<-h.release
		}
		return next(ctx, cmds)
	}
}

func (h *writeHook) recorded() [][]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.writes)
}

// stagedChannel sends to w_0 at once; to w_1..w_3 once the first write is
// held; to the others once tail is closed, counting those begun.
type stagedChannel struct {
	fakeChannel
	firstHeld <-chan struct{}
	tail      chan struct{}
	mu        sync.Mutex
	tailBegun int
}

func (s *stagedChannel) Send(ctx context.Context, n Notification) error {
	switch n.Recipient.ID {
	case "w_0":
	case "w_1", "w_2", "w_3":
		<-s.firstHeld
	default:
		s.mu.Lock()
		s.tailBegun++
		s.mu.Unlock()
		<-s.tail
	}
	return s.fakeChannel.Send(ctx, n)
}

func (s *stagedChannel) begun() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tailBegun
}

// A send done while no record of its batch is being written is written at
// once, alone; the sends done while a write is under way are written
// together, in one transaction, as soon as it returns.
func TestDispatcher_groupsTheRecordsOfSendsDoneTogether(t *testing.T) {
	ctx := context.Background()
	rdb := dial(t, testenv.RedisURL(t))
	hook := &writeHook{held: make(chan struct{}), release: make(chan struct{})}
	rdb.AddHook(hook)
	ledger, err := NewDeliveryLedger(rdb, DeliveryLedgerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ch := &stagedChannel{fakeChannel: fakeChannel{name: "fake"}, firstHeld: hook.held, tail: make(chan struct{})}
	d, err := NewDispatcher(ledger, map[string]Channel{"fake": ch}, stream.Telemetry{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	dels := make([]Delivery, 7)
	keys := make([]string, len(dels))
	for i := range dels {
		n := testNotification("")
		n.Recipient.ID = fmt.Sprintf("w_%d", i)
		dels[i] = Delivery{HashTag: "{avail.0}", Key: "avail:" + n.Recipient.ID + ":ev-1", Channel: "fake", MessageID: "1-0", Attempt: 1,
			Notification: n}
		keys[i] = ledger.Key(dels[i].HashTag, dels[i].Key)
	}
	done := make(chan []string)
	// Four workers: w_0's send is written alone (the write held); w_1..w_3
	// are done meanwhile, and their workers go on to w_4..w_6.
	go func() { outcomes, _ := d.DeliverBatch(ctx, dels, BatchOptions{Concurrency: 4}); done <- outcomes }()
	testenv.WaitFor(t, waitTimeout, func() bool { return ch.begun() == 3 }, "w_1..w_3 done and their workers sending the rest")
	close(hook.release)
	testenv.WaitFor(t, waitTimeout, func() bool { return len(hook.recorded()) >= 2 }, "a second write")
	close(ch.tail)
	for i, o := range <-done {
		if o != OutcomeSent {
			t.Errorf("delivery %d: %s, want sent", i, o)
		}
	}
	writes := hook.recorded()
	if !slices.Equal(writes[0], keys[:1]) {
		t.Errorf("first write %v, want %s's record alone, written at once", writes[0], keys[0])
	}
	if got := slices.Sorted(slices.Values(writes[1])); !slices.Equal(got, keys[1:4]) {
		t.Errorf("second write %v, want the three sends done during the first: %v", got, keys[1:4])
	}
	var all []string
	for _, w := range writes {
		all = append(all, w...)
	}
	if slices.Sort(all); !slices.Equal(all, keys) {
		t.Errorf("records written %v, want each of %v once", all, keys)
	}
	for _, k := range keys {
		if rec, err := ledger.Get(ctx, k); err != nil || rec.State != DeliverySent {
			t.Errorf("ledger record of %s: %+v, %v; want sent", k, rec, err)
		}
	}
}
