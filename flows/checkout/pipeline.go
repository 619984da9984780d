package checkout

import (
	"context"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
)

// call is one script call of a pipeline.
type call struct {
	keys []string
	args []any
}

// runPipelined runs script once per call in one pipeline round trip (per
// cluster node) and returns the replies by index. Calls that find the
// script missing from the server's cache (a restarted Redis) are sent again
// with EVAL, which caches it; the scripts of this package are commutative
// or independent per call, so that reordering is harmless.
func runPipelined(ctx context.Context, rdb redis.UniversalClient, script *redis.Script, calls []call) []*redis.Cmd {
	out := make([]*redis.Cmd, len(calls))
	if len(calls) == 0 {
		return out
	}
	pipe := rdb.Pipeline()
	for i, c := range calls {
		out[i] = script.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx) // errors are read per command
	var missing []int
	for i, cmd := range out {
		if err := cmd.Err(); err != nil && isNoScript(err) {
			missing = append(missing, i)
		}
	}
	if len(missing) == 0 {
		return out
	}
	pipe = rdb.Pipeline()
	for _, i := range missing {
		out[i] = script.Eval(ctx, pipe, calls[i].keys, calls[i].args...)
	}
	_, _ = pipe.Exec(ctx)
	return out
}

func isNoScript(err error) bool {
	return errors.Is(err, redis.ErrNoScript) || strings.HasPrefix(err.Error(), "NOSCRIPT")
}
