package comicbench

import (
	"context"
	"testing"

	"github.com/alicebob/miniredis/v2"

	"github.com/dropstream/dropstream/stream"
)

func TestRun_smallBenchMeasuresEveryFigure(t *testing.T) {
	rdb, err := stream.Dial(context.Background(), "redis://"+miniredis.RunT(t).Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	r, err := Run(context.Background(), rdb, Config{Subscriptions: 600, Matches: 20, Intake: 50, Workers: 4, Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	if r.Subscriptions < 590 || r.ActivePattern < 5 || r.LookupP99 <= 0 || r.MatchP99 <= 0 || r.IntakePerSecond <= 0 || r.MatcherPerSecond <= 0 {
		t.Errorf("result %+v: want every figure measured", r)
	}
	if _, err := Run(context.Background(), rdb, Config{Subscriptions: 10, Matches: 1, Intake: 1}); err == nil {
		t.Error("a second run over loaded subscriptions succeeded, want an error")
	}
}
