package script_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/script"
	"github.com/dropstream/dropstream/internal/testenv"
)

// addSource adds ARGV[2] to KEYS[1] and returns the sum, or fails when
// ARGV[1] is "fail".
const addSource = `
if ARGV[1] == 'fail' then return redis.error_reply('ERR asked to fail') end
return redis.call('INCRBY', KEYS[1], ARGV[2])`

var add = script.New(addSource)

// flushed returns a client of b whose server holds no script.
func flushed(t *testing.T, b testenv.Backend) redis.UniversalClient {
	t.Helper()
	rdb := b.Client(t)
	if err := rdb.ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	return rdb
}

// calls returns n calls adding 1 to key "k<i mod keys>", each key under a
// hash tag of its own so that a cluster spreads them over its nodes.
func calls(n, keys int) []script.Call {
	out := make([]script.Call, n)
	for i := range out {
		out[i] = script.Call{Keys: []string{fmt.Sprintf("{k%d}", i%keys)}, Args: []any{"ok", 1}}
	}
	return out
}

// replies returns the integer replies of cmds, failing on any error.
func replies(t *testing.T, cmds []*redis.Cmd) []int64 {
	t.Helper()
	out := make([]int64, len(cmds))
	for i, c := range cmds {
		n, err := c.Int64()
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		out[i] = n
	}
	return out
}

// wantCounts checks that each of keys holds n/keys (every call ran once).
func wantCounts(t *testing.T, rdb redis.UniversalClient, n, keys int) {
	t.Helper()
	for k := range keys {
		got, err := rdb.Get(context.Background(), fmt.Sprintf("{k%d}", k)).Int()
		if err != nil || got != n/keys {
			t.Errorf("key %d holds %d (%v), want %d: a call ran twice or not at all", k, got, err, n/keys)
		}
	}
}

func TestRunAll_runsEveryCallOnceAfterAFlush(t *testing.T) {
	for _, b := range testenv.PrivateWithCluster() {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			rdb := b.Client(t)
			for round, flush := range []bool{false, true, false, true} {
				if flush {
					if err := rdb.ScriptFlush(ctx).Err(); err != nil {
						t.Fatal(err)
					}
				}
				cmds, err := add.RunAll(ctx, rdb, calls(12, 3))
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				for i, n := range replies(t, cmds) {
					if want := int64(4*round + i/3 + 1); n != want {
						t.Fatalf("round %d: call %d replied %d, want %d", round, i, n, want)
					}
				}
			}
			wantCounts(t, rdb, 48, 3)
		})
	}
}

func TestRunAll_keepsEachCallsError(t *testing.T) {
	for _, b := range testenv.PrivateBackends() {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			rdb := b.Client(t)
			for _, flush := range []bool{false, true} {
				if flush {
					if err := rdb.ScriptFlush(ctx).Err(); err != nil {
						t.Fatal(err)
					}
				}
				cs := calls(3, 3)
				cs[1].Args[0] = "fail"
				cmds, err := add.RunAll(ctx, rdb, cs)
				if err != nil {
					t.Fatal(err)
				}
				for i, c := range cmds {
					if err := c.Err(); (err != nil) != (i == 1) {
						t.Errorf("flush %t: call %d: error %v, want one for call 1 only", flush, i, err)
					}
				}
			}
			if n, _ := rdb.Exists(ctx, "{k1}").Result(); n != 0 {
				t.Error("the failed call wrote its key")
			}
		})
	}
}

func TestRunAll_empty(t *testing.T) {
	rdb := testenv.Backends()[0].Client(t)
	cmds, err := add.RunAll(context.Background(), rdb, nil)
	if err != nil || len(cmds) != 0 {
		t.Fatalf("RunAll(nil) = %v, %v; want no commands", cmds, err)
	}
}

func TestRun_loadsAMissingScript(t *testing.T) {
	for _, b := range testenv.PrivateBackends() {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			rdb := b.Client(t)
			for i := range 3 {
				if err := rdb.ScriptFlush(ctx).Err(); err != nil {
					t.Fatal(err)
				}
				n, err := add.Run(ctx, rdb, []string{"{k0}"}, "ok", 1).Int64()
				if err != nil || n != int64(i+1) {
					t.Fatalf("run %d: %d (%v), want %d", i, n, err, i+1)
				}
			}
		})
	}
}

// loadMidPipeline makes the server cache add in the middle of the first
// pipeline of several commands, as another client loading it concurrently
// would: the commands before it get NOSCRIPT, those after it run.
type loadMidPipeline struct{ once sync.Once }

func (h *loadMidPipeline) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *loadMidPipeline) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *loadMidPipeline) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		injected := false
		if len(cmds) >= 4 {
			h.once.Do(func() { injected = true })
		}
		if !injected {
			return next(ctx, cmds)
		}
		load := redis.NewStringCmd(ctx, "script", "load", addSource)
		with := append(append(append([]redis.Cmder(nil), cmds[:2]...), load), cmds[2:]...)
		return next(ctx, with)
	}
}

// TestRunAll_retriesOnlyTheMissingCalls: with the script loaded in the
// middle of the pipeline, the two calls before it are retried after the
// others (the documented reordering) and every call runs once.
func TestRunAll_retriesOnlyTheMissingCalls(t *testing.T) {
	for _, b := range testenv.PrivateBackends() {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			rdb := flushed(t, b)
			rdb.AddHook(&loadMidPipeline{})
			cs := make([]script.Call, 4)
			for i := range cs {
				cs[i] = script.Call{Keys: []string{"{k0}"}, Args: []any{"ok", strconv.Itoa(1 << i)}}
			}
			cmds, err := add.RunAll(ctx, rdb, cs)
			if err != nil {
				t.Fatal(err)
			}
			// Calls 2 and 3 ran first (4, then 4+8), then the retried 0
			// and 1 (12+1, then 13+2).
			want := []int64{13, 15, 4, 12}
			for i, n := range replies(t, cmds) {
				if n != want[i] {
					t.Fatalf("replies %v, want %v", replies(t, cmds), want)
				}
			}
		})
	}
}

// failLoad fails every SCRIPT LOAD.
type failLoad struct{}

var errLoad = errors.New("load refused")

func (failLoad) DialHook(next redis.DialHook) redis.DialHook { return next }
func (failLoad) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "script" {
			cmd.SetErr(errLoad)
			return errLoad
		}
		return next(ctx, cmd)
	}
}
func (failLoad) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func TestRunAll_reportsAFailedLoad(t *testing.T) {
	ctx := context.Background()
	rdb := flushed(t, testenv.Backends()[0])
	rdb.AddHook(failLoad{})
	cmds, err := add.RunAll(ctx, rdb, calls(2, 2))
	if !errors.Is(err, errLoad) {
		t.Fatalf("RunAll = %v, want the load error", err)
	}
	for i, c := range cmds {
		if !errors.Is(c.Err(), errLoad) {
			t.Errorf("call %d: %v, want the load error", i, c.Err())
		}
	}
}

// TestQueue_sharesAPipelineWithOtherCommands: Queue and Retry leave the
// caller's own commands of the pipeline alone.
func TestQueue_sharesAPipelineWithOtherCommands(t *testing.T) {
	for _, b := range testenv.PrivateBackends() {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			rdb := flushed(t, b)
			cs := calls(2, 2)
			pipe := rdb.Pipeline()
			set := pipe.Set(ctx, "{other}", "v", 0)
			cmds := add.Queue(ctx, pipe, cs)
			_, _ = pipe.Exec(ctx)
			for i, c := range cmds {
				if !script.IsNoScript(c.Err()) {
					t.Fatalf("call %d before Retry: %v, want NOSCRIPT", i, c.Err())
				}
			}
			if err := add.Retry(ctx, rdb, cmds); err != nil {
				t.Fatal(err)
			}
			if got := replies(t, cmds); got[0] != 1 || got[1] != 1 {
				t.Fatalf("replies %v, want [1 1]", got)
			}
			if set.Err() != nil {
				t.Fatalf("SET in the pipeline: %v", set.Err())
			}
			wantCounts(t, rdb, 2, 2)
		})
	}
}

func TestIsNoScript_recognisesTheServersError(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"go-redis", redis.ErrNoScript, true},
		{"wrapped", fmt.Errorf("x: %w", redis.ErrNoScript), true},
		{"other", errors.New("NOSCRIPT but not a redis error"), false},
		{"redis.Nil", redis.Nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := script.IsNoScript(tc.err); got != tc.want {
				t.Fatalf("IsNoScript(%v) = %t, want %t", tc.err, got, tc.want)
			}
		})
	}
}

// TestQueue_boxedKeysGoFirst: a call's Boxed keys are its first KEYS, then
// its Keys, after a flush as before it.
func TestQueue_boxedKeysGoFirst(t *testing.T) {
	keys := script.New("return table.concat(KEYS, ',') .. '|' .. table.concat(ARGV, ',')")
	for _, b := range testenv.PrivateBackends() {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			rdb := b.Client(t)
			call := script.Call{Boxed: []any{"{a}1", "{a}2"}, Keys: []string{"{a}3"}, Args: []any{"x", 7}}
			for _, flush := range []bool{false, true} {
				if flush {
					if err := rdb.ScriptFlush(ctx).Err(); err != nil {
						t.Fatal(err)
					}
				}
				pipe := rdb.Pipeline()
				cmds := keys.Queue(ctx, pipe, []script.Call{call, {Keys: []string{"{a}4"}}})
				_, _ = pipe.Exec(ctx)
				if err := keys.Retry(ctx, rdb, cmds); err != nil {
					t.Fatal(err)
				}
				got, err := cmds[0].Text()
				if want := "{a}1,{a}2,{a}3|x,7"; err != nil || got != want {
					t.Errorf("flush %t: %q (%v), want %q", flush, got, err, want)
				}
				if got, err := cmds[1].Text(); err != nil || got != "{a}4|" {
					t.Errorf("flush %t: a call without Boxed keys: %q (%v)", flush, got, err)
				}
			}
		})
	}
}
