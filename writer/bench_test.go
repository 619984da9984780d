package writer_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/internal/benchstat"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer"
)

// BenchmarkProjection_listVenuePage lists the open slots of a venue, a page
// of 20, as `bench api` does, over 48 open slots of three venues; it
// reports the process's and Redis's CPU per page.
func BenchmarkProjection_listVenuePage(b *testing.B) {
	ctx := context.Background()
	p, rdb := benchProjection(b)
	topic := avail.NewTopics(partitions).Transitions
	for _, venue := range []string{"1001", "1002", "1003"} {
		for _, party := range []int{2, 4} {
			for _, hhmm := range []string{"17:00", "17:15", "17:30", "17:45", "18:00", "18:15", "18:30", "18:45"} {
				e := avail.Entity{Key: avail.SlotKey("simulator", venue, "2099-03-08", hhmm, party), Kind: avail.EntitySlot,
					Provider: "simulator", Venue: venue, VenueName: "Venue " + venue, Date: "2099-03-08", Time: hhmm, PartySize: party}
				tr := transition(e, "open", 1, false)
				tr.ScopeKey = "sim|" + venue + "|2099-03-08|" + string(rune('0'+party)) + "|"
				if _, err := p.Apply(ctx, topic.Partition(tr.ScopeKey), tr); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	f := writer.Filter{Venue: "1001", State: writer.StateOpen}
	before := benchstat.ReadCPU(ctx, rdb)
	for b.Loop() {
		items, _, err := p.List(ctx, f, "", 20)
		if err != nil || len(items) != 16 {
			b.Fatalf("List: %d items, %v; want 16", len(items), err)
		}
	}
	reportCPU(b, rdb, before)
}

// BenchmarkProjection_apply applies raw flips, an open then a close of each
// of 256 slots in turn; it reports the process's and Redis's CPU per
// transition.
func BenchmarkProjection_apply(b *testing.B) {
	ctx := context.Background()
	p, rdb := benchProjection(b)
	topic := avail.NewTopics(partitions).Transitions
	var slots []avail.Entity
	for _, venue := range []string{"1001", "1002", "1003", "1004"} {
		for party := range 4 {
			for _, hhmm := range []string{"17:00", "17:15", "17:30", "17:45", "18:00", "18:15", "18:30", "18:45",
				"19:00", "19:15", "19:30", "19:45", "20:00", "20:15", "20:30", "20:45"} {
				slots = append(slots, avail.Entity{Key: avail.SlotKey("simulator", venue, "2099-03-08", hhmm, party+1),
					Kind: avail.EntitySlot, Provider: "simulator", Venue: venue, VenueName: "Venue " + venue,
					Date: "2099-03-08", Time: hhmm, PartySize: party + 1})
			}
		}
	}
	n := 0
	before := benchstat.ReadCPU(ctx, rdb)
	for b.Loop() {
		e := slots[n%len(slots)]
		tr := transition(e, []string{"open", "close"}[n/len(slots)%2], n/len(slots)+1, false)
		if _, err := p.Apply(ctx, topic.Partition(tr.ScopeKey), tr); err != nil {
			b.Fatal(err)
		}
		n++
	}
	reportCPU(b, rdb, before)
}

// benchProjection returns a projection on a real redis-server.
func benchProjection(b *testing.B) (*writer.Projection, redis.UniversalClient) {
	rdb := testenv.Backends()[1].Client(b)
	p, err := writer.NewProjection(rdb, writer.ProjectionConfig{Partitions: partitions}, stream.Telemetry{})
	if err != nil {
		b.Fatal(err)
	}
	return p, rdb
}

// reportCPU reports the process's and Redis's CPU per op since before.
func reportCPU(b *testing.B, rdb redis.UniversalClient, before benchstat.CPU) {
	cpu := benchstat.ReadCPU(context.Background(), rdb).PerItem(before, b.N)
	b.ReportMetric(float64(cpu.Process.Nanoseconds())/1e3, "process-µs/op")
	b.ReportMetric(float64(cpu.Redis.Nanoseconds())/1e3, "redis-µs/op")
}
