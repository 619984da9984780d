package throttle

import (
	"context"
	"strconv"
	"testing"

	"github.com/dropstream/dropstream/internal/testenv"
)

// BenchmarkTakeMany measures a batch of 64 takes in one round trip (the
// deliver stage's per-batch call): allocations per batch, of which the
// script's arguments are the part this package controls.
func BenchmarkTakeMany(b *testing.B) {
	rdb := testenv.Backends()[1].Client(b) // redis-server: its allocations stay out of the figure
	th, err := New(rdb, Config{Destination: Limit{Rate: 1e6, Burst: 1e6}, Channels: map[string]Limit{"email": {Rate: 1e6, Burst: 1e6}}})
	if err != nil {
		b.Fatal(err)
	}
	asks := make([]Ask, 64)
	for i := range asks {
		asks[i] = Ask{Dest: "d" + strconv.Itoa(i), Channel: []string{"webhook", "email"}[i%2]}
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, errs := th.TakeMany(ctx, asks); errs[0] != nil {
			b.Fatal(errs[0])
		}
	}
}
