// Package script runs Redis Lua scripts with EVALSHA; on NOSCRIPT it loads
// the script and sends the call again, once.
package script

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Script is a Lua script. It is safe for concurrent use.
type Script struct {
	s    *redis.Script
	hash any // s.Hash(), boxed once
}

// New returns the script of the Lua source src.
func New(src string) *Script {
	s := redis.NewScript(src)
	return &Script{s: s, hash: s.Hash()}
}

// Call is one call of a script: its KEYS and ARGV.
type Call struct {
	Keys []string
	// Boxed are further keys, sent before Keys, that the caller boxed
	// once and keeps for other calls (a string boxed costs an
	// allocation). Args of such a call are sent as they are.
	Boxed []any
	Args  []any
}

// Load caches the script on the server (on every master of a cluster).
func (s *Script) Load(ctx context.Context, rdb redis.Scripter) error {
	if err := s.s.Load(ctx, rdb).Err(); err != nil {
		return fmt.Errorf("script: load: %w", err)
	}
	return nil
}

// Run runs one call: EVALSHA, and EVAL (which caches the script) when the
// server lacks it. Its reply or error is the returned command's.
func (s *Script) Run(ctx context.Context, rdb redis.Scripter, keys []string, args ...any) *redis.Cmd {
	return s.s.Run(ctx, rdb, keys, args...)
}

// RunAll runs the calls in one pipeline and returns their commands by
// index. Calls that get NOSCRIPT run again after the others, so two calls
// on one key must not share a RunAll. The error is that of loading the
// script.
func (s *Script) RunAll(ctx context.Context, rdb redis.UniversalClient, calls []Call) ([]*redis.Cmd, error) {
	if len(calls) == 0 {
		return nil, nil
	}
	pipe := rdb.Pipeline()
	cmds := s.Queue(ctx, pipe, calls)
	_, _ = pipe.Exec(ctx) // errors are read per command
	return cmds, s.Retry(ctx, rdb, cmds)
}

// Queue adds an EVALSHA of each call to pipe; after executing it, pass the
// commands to Retry. The commands of calls with Boxed keys share one
// array of arguments.
func (s *Script) Queue(ctx context.Context, pipe redis.Pipeliner, calls []Call) []*redis.Cmd {
	size := 0
	for _, c := range calls {
		if c.Boxed != nil {
			size += 3 + len(c.Boxed) + len(c.Keys) + len(c.Args)
		}
	}
	buf := make([]any, 0, size)
	cmds := make([]*redis.Cmd, len(calls))
	for i, c := range calls {
		if c.Boxed == nil {
			cmds[i] = s.s.EvalSha(ctx, pipe, c.Keys, c.Args...)
			continue
		}
		n := len(buf)
		buf = append(append(buf, "evalsha", s.hash, len(c.Boxed)+len(c.Keys)), c.Boxed...)
		for _, k := range c.Keys {
			buf = append(buf, k)
		}
		buf = append(buf, c.Args...)
		cmds[i] = redis.NewCmd(ctx, buf[n:len(buf):len(buf)]...)
		_ = pipe.Process(ctx, cmds[i])
	}
	return cmds
}

// Retry loads the script and sends again the commands of cmds that failed
// with NOSCRIPT, replacing them. A failed load is returned and set on
// them.
func (s *Script) Retry(ctx context.Context, rdb redis.UniversalClient, cmds []*redis.Cmd) error {
	var missing []int
	for i, c := range cmds {
		if IsNoScript(c.Err()) {
			missing = append(missing, i)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := s.Load(ctx, rdb); err != nil {
		for _, i := range missing {
			cmds[i].SetErr(err)
		}
		return err
	}
	pipe := rdb.Pipeline()
	for _, i := range missing {
		cmds[i] = redis.NewCmd(ctx, cmds[i].Args()...)
		_ = pipe.Process(ctx, cmds[i])
	}
	_, _ = pipe.Exec(ctx)
	return nil
}

// IsNoScript reports whether err says that the server lacks a script.
func IsNoScript(err error) bool {
	return err != nil && (errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT"))
}
