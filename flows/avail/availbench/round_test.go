package availbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/avail/availjson"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// errLostReply stands for a pipeline reply lost after Redis ran it (a read
// timeout): the client's caller sees an error, the scripts did run.
var errLostReply = errors.New("test: reply lost")

// loseReplies fails the first n pipelines that ran a script successfully,
// after Redis ran them.
type loseReplies struct {
	mu sync.Mutex
	n  int
}

// isDiffScript reports a call of the diff's script, the one EVALSHA of seven
// keys (the runtime's own scripts, acknowledgements among them, take
// fewer).
func isDiffScript(c redis.Cmder) bool {
	args := c.Args()
	return c.Name() == "evalsha" && len(args) > 2 && fmt.Sprint(args[2]) == "7"
}

func (h *loseReplies) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *loseReplies) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *loseReplies) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		ran := false
		for _, c := range cmds {
			ran = ran || isDiffScript(c) && c.Err() == nil
		}
		h.mu.Lock()
		lose := ran && h.n > 0
		if lose {
			h.n--
		}
		h.mu.Unlock()
		if !lose {
			return err
		}
		for _, c := range cmds {
			c.SetErr(errLostReply)
		}
		return errLostReply
	}
}

// TestBench_exactTransitionsWhenSnapshotsAreAppliedTwice: when the diff
// stage applies snapshots a second time (their first replies were lost),
// each round still waits for every snapshot, so the churn runs' backlog is
// exactly what the workload implies: per scope, the first churn run's raw
// open and close, then per run those plus the stable confirmations of the
// previous run's two flips; no baseline transition. Analytics then finds
// every transition and every run in ClickHouse.
func TestBench_exactTransitionsWhenSnapshotsAreAppliedTwice(t *testing.T) {
	ctx := context.Background()
	rdb, err := stream.Dial(ctx, testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	lost := &loseReplies{n: 6}
	rdb.AddHook(lost)
	const scopes, runs = 60, 3
	b, err := Open(ctx, rdb, Config{Scopes: scopes, PerScope: 20, Churn: 0.05, DiffBatch: 2, ClickHouseDSN: testenv.ClickHouseDSN(t), Telemetry: stream.Telemetry{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	if _, _, _, _, err := b.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Diff(ctx, runs); err != nil {
		t.Fatal(err)
	}
	if lost.n != 0 {
		t.Fatalf("%d replies left to lose: the test did not replay snapshots", lost.n)
	}
	counts := map[string]int{}
	total := 0
	for p := range b.topics.Transitions.Partitions {
		entries, err := rdb.XRange(ctx, b.topics.Transitions.Stream(p), "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			payload, _ := e.Values["payload"].(string)
			typ, _ := e.Values["type"].(string)
			trs, err := availjson.DecodeTransitions(typ, []byte(payload))
			if err != nil {
				t.Fatal(err)
			}
			for _, tr := range trs {
				phase := "raw"
				if tr.Stable {
					phase = "stable"
				}
				if tr.Baseline {
					phase += " baseline"
				}
				counts[tr.Kind+" "+phase]++
				total++
			}
		}
	}
	want := map[string]int{"open raw": scopes * runs, "close raw": scopes * runs,
		"open stable": scopes * (runs - 1), "close stable": scopes * (runs - 1)}
	if total != scopes*(4*runs-2) || len(counts) != len(want) {
		t.Fatalf("backlog of %d transitions %v, want %d %v", total, counts, scopes*(4*runs-2), want)
	}
	for k, n := range want {
		if counts[k] != n {
			t.Errorf("%s: %d transitions, want %d", k, counts[k], n)
		}
	}
	if left, err := stream.Unhandled(ctx, b.rdb, b.topics.Snapshots, "avail-diff"); err != nil || left != 0 {
		t.Errorf("%d snapshots unhandled (%v), want 0", left, err)
	}
	// The runs table holds each run once, though its stream holds the
	// replays' records too.
	actx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	r, err := b.Analytics(actx)
	if err != nil || r.Count != int64(total) {
		t.Fatalf("Analytics = %d transitions, %v; want %d", r.Count, err, total)
	}
}
