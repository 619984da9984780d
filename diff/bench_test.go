package diff

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/internal/testenv"
)

// churnFleet is a set of scopes of perScope entities each, where every run
// of a scope slides its window over a ring of 2×perScope entities by one:
// one entity closes and one opens, 1% churn at 100 entities.
type churnFleet struct {
	scopes []string
	ring   [][]avail.Entity
	runs   []int
	perSc  int
}

func newChurnFleet(scopes, perScope int) *churnFleet {
	f := &churnFleet{perSc: perScope, runs: make([]int, scopes)}
	for s := range scopes {
		venue := fmt.Sprintf("venue-%06d", s)
		f.scopes = append(f.scopes, "src-resy-1|"+venue+"|2025-07-04|2|")
		ring := make([]avail.Entity, 2*perScope)
		for i := range ring {
			hhmm := fmt.Sprintf("%02d:%02d", 10+i/12%12, i%12*5)
			ring[i] = avail.Entity{Key: avail.SlotKey("resy", venue, "2025-07-04", hhmm, 2+i/144), Kind: avail.EntitySlot,
				Provider: "resy", Venue: venue, VenueName: "Restaurant " + venue, Date: "2025-07-04", Time: hhmm,
				PartySize: 2 + i/144, Attrs: map[string]string{"type": "Dining Room"}}
		}
		f.ring = append(f.ring, ring)
	}
	return f
}

// next returns the next snapshot of scope s.
func (f *churnFleet) next(s int) avail.Snapshot {
	r := f.runs[s]
	f.runs[s]++
	ents := make([]avail.Entity, f.perSc)
	for i := range ents {
		ents[i] = f.ring[s][(r+i)%len(f.ring[s])]
	}
	return avail.Snapshot{RunID: fmt.Sprintf("run-%09d", r), SourceID: "src-resy-1", Provider: "resy",
		ScopeKey: f.scopes[s], RunAt: t0.Add(time.Duration(r) * time.Minute), StartedAt: t0, OK: true, Entities: ents}
}

// BenchmarkApply measures observations per second through the diff script
// on a real redis-server: scopes of 100 entities, 1% churn per run, one
// script per round trip (Apply) or 100 per pipeline (ApplyBatch). One op
// is one snapshot. kPerVenue=4 turns per-venue stabilization on
// (PerVenueMaxK 4).
func BenchmarkApply(b *testing.B) {
	const scopes, perScope = 1000, 100
	cases := []struct {
		batch int
		guard *Guard
		maxK  int
	}{{1, nil, 0}, {100, nil, 0}, {100, &DefaultGuard, 0}, {100, nil, 4}}
	for _, tc := range cases {
		batch, guard, maxK := tc.batch, tc.guard, tc.maxK
		name := fmt.Sprintf("batch=%d", batch)
		if guard != nil {
			name += "/guard=on"
		}
		if maxK > 0 {
			name += fmt.Sprintf("/kPerVenue=%d", maxK)
		}
		b.Run(name, func(b *testing.B) {
			rdb := testenv.Dial(b, testenv.RedisURL(b))
			ctx := context.Background()
			topics := avail.NewTopics(8)
			fleet := newChurnFleet(scopes, perScope)
			warm := make([]Input, 0, scopes)
			for range 2 { // baseline, then its confirmation: steady state
				warm = warm[:0]
				for s := range scopes {
					warm = append(warm, Input{Snapshot: fleet.next(s), TraceParent: testTraceParent, PerVenueMaxK: maxK})
				}
				if _, err := ApplyBatch(ctx, rdb, topics, warm); err != nil {
					b.Fatal(err)
				}
			}
			inputs := make([]Input, batch)
			next := 0
			calls0, usec0 := evalshaStats(b, rdb)
			rcpu0, cpu0 := redisCPU(b, rdb), processCPU()
			b.ResetTimer()
			for i := 0; i < b.N; i += batch {
				n := min(batch, b.N-i)
				for j := range n {
					inputs[j] = Input{Snapshot: fleet.next(next), TraceParent: testTraceParent, Guard: guard, PerVenueMaxK: maxK}
					next = (next + 1) % scopes
				}
				var err error
				if batch == 1 && guard == nil && maxK == 0 {
					_, err = Apply(ctx, rdb, topics, inputs[0].Snapshot, inputs[0].TraceParent)
				} else {
					_, err = ApplyBatch(ctx, rdb, topics, inputs[:n])
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N*perScope)/b.Elapsed().Seconds(), "observations/s")
			// CPU per snapshot, which unlike wall time holds on a loaded machine.
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "go-cpu-µs/op")
			if rcpu := redisCPU(b, rdb); rcpu0 > 0 && rcpu > 0 {
				b.ReportMetric(float64((rcpu-rcpu0).Microseconds())/float64(b.N), "redis-cpu-µs/op")
			}
			if calls, usec := evalshaStats(b, rdb); calls > calls0 {
				b.ReportMetric(float64(usec-usec0)/float64(calls-calls0), "redis-µs/script")
			}
		})
	}
}

// processCPU is the CPU time (user + system) this process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// redisCPU is the CPU time (used_cpu_user + used_cpu_sys of INFO cpu) the
// server used so far, or 0 when it cannot be read.
func redisCPU(b *testing.B, rdb redis.UniversalClient) time.Duration {
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Logf("info cpu: %v", err)
		return 0
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_user" || k == "used_cpu_sys" {
			f, _ := strconv.ParseFloat(v, 64)
			total += f
		}
	}
	return time.Duration(total * float64(time.Second))
}

// evalshaStats returns the server's EVALSHA calls and microseconds so far
// (INFO commandstats), or zeros when they cannot be read.
func evalshaStats(b *testing.B, rdb redis.UniversalClient) (calls, usec int64) {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Logf("info commandstats: %v", err)
		return 0, 0
	}
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:")
		if !ok {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				calls = n
			case "usec":
				usec = n
			}
		}
	}
	return calls, usec
}
