package stream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/bounds"
	"github.com/dropstream/dropstream/internal/script"
)

// ErrNotReplicated: a write was applied on the primary but fewer replicas
// than asked confirmed it in time. The caller must not answer success;
// IsUnavailable reports it (the API answers 503).
var ErrNotReplicated = errors.New("write not confirmed by enough replicas in time")

// Bounds of ReplicaWait.
const (
	// MaxWaitReplicas bounds ReplicaWait.Replicas.
	MaxWaitReplicas = 16
	// MaxWaitTimeout bounds ReplicaWait.Timeout: a WAIT sent in a
	// pipeline is read under the client's read timeout (3s by default).
	MaxWaitTimeout = 2 * time.Second
)

// fenceChannel is the channel of the fence a replica wait sends before its
// WAIT; nobody listens to it.
const fenceChannel = "dropstream:replication-fence"

// ReplicaWait makes a write a caller relies on wait until Replicas replicas
// hold it (Redis's WAIT), for at most Timeout, before the caller answers.
// The zero value waits for none: a failover may lose the last writes.
// WAIT goes on the write's connection, after a fence (a replicated PUBLISH)
// so that it also covers writes other connections made before. One primary
// only: on Redis Cluster WAIT covers one node, and Validate refuses it.
type ReplicaWait struct {
	// Replicas is how many replicas must confirm a write, at most
	// MaxWaitReplicas; 0 waits for none.
	Replicas int
	// Timeout bounds one wait: from 1ms to MaxWaitTimeout. A write not
	// confirmed by then fails with ErrNotReplicated.
	Timeout time.Duration
}

// ParseReplicaWait reads "off" (or "") — no wait, the default — or
// "REPLICAS/TIMEOUT", such as "1/500ms", and validates it.
func ParseReplicaWait(s string) (ReplicaWait, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "off" {
		return ReplicaWait{}, nil
	}
	n, d, ok := strings.Cut(s, "/")
	replicas, err := strconv.Atoi(n)
	if !ok || err != nil {
		return ReplicaWait{}, fmt.Errorf("redis wait %q: want off or REPLICAS/TIMEOUT, such as 1/500ms", s)
	}
	timeout, err := time.ParseDuration(d)
	if err != nil {
		return ReplicaWait{}, fmt.Errorf("redis wait %q: timeout: %w", s, err)
	}
	w := ReplicaWait{Replicas: replicas, Timeout: timeout}
	if replicas == 0 {
		return ReplicaWait{}, nil
	}
	return w, w.Validate()
}

// Validate checks the replicas, and the timeout of a wait that is on.
func (w ReplicaWait) Validate() error {
	errs := bounds.Check(nil, "redis wait: replicas", w.Replicas, 0, MaxWaitReplicas)
	if w.On() {
		errs = bounds.Check(errs, "redis wait: timeout", w.Timeout, time.Millisecond, MaxWaitTimeout)
	}
	return errors.Join(errs...)
}

// On reports whether writes wait for replicas.
func (w ReplicaWait) On() bool { return w.Replicas > 0 }

// String is the form ParseReplicaWait reads.
func (w ReplicaWait) String() string {
	if !w.On() {
		return "off"
	}
	return strconv.Itoa(w.Replicas) + "/" + w.Timeout.String()
}

// queue adds the fence and WAIT to pipe and returns WAIT's command, nil
// when w is off.
func (w ReplicaWait) queue(ctx context.Context, pipe redis.Pipeliner) *redis.Cmd {
	if !w.On() {
		return nil
	}
	pipe.Publish(ctx, fenceChannel, "")
	return pipe.Do(ctx, "wait", w.Replicas, w.Timeout.Milliseconds())
}

// check returns ErrNotReplicated when WAIT's command counted fewer
// replicas than asked, or the command's error.
func (w ReplicaWait) check(wait *redis.Cmd) error {
	if wait == nil {
		return nil
	}
	n, err := wait.Int64()
	if err != nil {
		return fmt.Errorf("redis wait: %w", err)
	}
	if n < int64(w.Replicas) {
		return fmt.Errorf("%w: %d of %d replicas within %s", ErrNotReplicated, n, w.Replicas, w.Timeout)
	}
	return nil
}

// Exec sends the commands queue adds in one pipeline, with the fence and
// WAIT when w is on; it returns the first failed command's error, else a
// wrapped ErrNotReplicated when too few replicas confirmed.
func (w ReplicaWait) Exec(ctx context.Context, rdb redis.UniversalClient, queue func(redis.Pipeliner)) error {
	pipe := rdb.Pipeline()
	queue(pipe)
	wait := w.queue(ctx, pipe)
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	return w.check(wait)
}

// Confirm waits until the replicas hold every write the primary ran before
// it, for an answer relying on other connections' writes; nil when w is off.
func (w ReplicaWait) Confirm(ctx context.Context, rdb redis.UniversalClient) error {
	if !w.On() {
		return nil
	}
	return w.Exec(ctx, rdb, func(redis.Pipeliner) {})
}

// RunScript runs one call of sc (as sc.Run) followed on the same connection
// by the fence and WAIT when w is on. Its error is the script's, else a
// wrapped ErrNotReplicated.
func (w ReplicaWait) RunScript(ctx context.Context, rdb redis.UniversalClient, sc *script.Script, keys []string, args ...any) *redis.Cmd {
	if !w.On() {
		return sc.Run(ctx, rdb, keys, args...)
	}
	pipe := rdb.Pipeline()
	cmd := sc.Queue(ctx, pipe, []script.Call{{Keys: keys, Args: args}})[0]
	wait := w.queue(ctx, pipe)
	_, _ = pipe.Exec(ctx) // errors are read per command
	var err error
	switch {
	case script.IsNoScript(cmd.Err()):
		// The call did nothing: run it alone, then confirm.
		if cmd = sc.Run(ctx, rdb, keys, args...); cmd.Err() == nil {
			err = w.Confirm(ctx, rdb)
		}
	case cmd.Err() == nil:
		err = w.check(wait)
	}
	if err != nil {
		cmd.SetErr(err)
	}
	return cmd
}
