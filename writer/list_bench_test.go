package writer_test

import (
	"context"
	"testing"

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
	rdb := testenv.Backends()[1].Client(b)
	p, err := writer.NewProjection(rdb, writer.ProjectionConfig{Partitions: partitions}, stream.Telemetry{})
	if err != nil {
		b.Fatal(err)
	}
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
	cpu := benchstat.ReadCPU(ctx, rdb).PerItem(before, b.N)
	b.ReportMetric(float64(cpu.Process.Nanoseconds())/1e3, "process-µs/op")
	b.ReportMetric(float64(cpu.Redis.Nanoseconds())/1e3, "redis-µs/op")
}
