package streamtest

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// testReadBytesBoundsReads checks that large entries are read fewer at a
// time than BatchSize, by ReadBytes, with every message handled once, and
// that a batch tells whether more entries were waiting behind its read.
func testReadBytesBoundsReads(t *testing.T, b Backend) {
	rdb := b.Client(t)
	topic := newTopic(1)
	const (
		n         = 40
		entry     = 2000 // payload bytes
		readBytes = 8 << 10
	)
	msgs := make([]*stream.Message, n)
	for i := range msgs {
		payload := strconv.Itoa(i) + ":" + strings.Repeat("x", entry)
		msgs[i] = stream.NewMessage(keyOf(i, 5), "large", []byte(payload[:entry]))
	}
	if err := stream.NewPublisher(rdb, stream.Telemetry{}).Publish(context.Background(), topic, msgs...); err != nil {
		t.Fatal(err)
	}
	type batch struct {
		size int
		more bool
	}
	var (
		mu      sync.Mutex
		batches []batch
		seen    = map[string]int{}
	)
	cfg := fastConfig()
	cfg.BatchSize, cfg.ReadBytes = 100, readBytes
	start(t, rdb, stream.Stage{Name: "large", Topic: topic, Config: cfg,
		BatchHandler: func(_ context.Context, ms []*stream.Message) error {
			mu.Lock()
			defer mu.Unlock()
			batches = append(batches, batch{len(ms), ms[0].MoreWaiting()})
			for _, m := range ms {
				if m.MoreWaiting() != ms[0].MoreWaiting() {
					t.Errorf("message %s: MoreWaiting %v, its batch-mates %v", m.ID, m.MoreWaiting(), ms[0].MoreWaiting())
				}
				seen[strings.SplitN(string(m.Payload), ":", 2)[0]]++
			}
			return nil
		}}, stream.Telemetry{})
	testenv.WaitFor(t, waitTimeout, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == n
	}, "not every message was handled")
	waitPending(t, rdb, topic, "large", 0)
	mu.Lock()
	defer mu.Unlock()
	for i := range n {
		if c := seen[strconv.Itoa(i)]; c != 1 {
			t.Errorf("message %d handled %d times, want 1", i, c)
		}
	}
	// The first read assumes 256-byte entries (32 of them); the next ones
	// know they hold about 2 KB, so ask for 3 (8 KiB / 2 KB and framing).
	if len(batches) == 0 || batches[0].size > readBytes/256 {
		t.Fatalf("first read %v, want at most %d entries", batches, readBytes/256)
	}
	total := batches[0].size
	for i, b := range batches[1:] {
		total += b.size
		if b.size > 3 {
			t.Errorf("read %d returned %d entries of %d bytes, want at most 3 within %d bytes", i+2, b.size, entry, readBytes)
		}
		if b.more != (b.size == 3) {
			t.Errorf("read %d of %d entries: MoreWaiting %v, want %v (3 asked)", i+2, b.size, b.more, b.size == 3)
		}
	}
	if !batches[0].more || total != n {
		t.Errorf("batches %v: want the first full and %d messages in all", batches, n)
	}
}
