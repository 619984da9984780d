package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/rediskey"
	"github.com/dropstream/dropstream/internal/tick"
)

// Pausing a stage. Every copy looks at one field of a Redis hash every
// ControlInterval. A copy seeing its stage paused finishes and acknowledges
// its batch and stops reading and claiming, but keeps its consumer name and
// its stats; it reads again within ControlInterval of the resume.

// pausedKey is the hash of paused stages: stage name -> when it was paused
// (RFC 3339).
var pausedKey = rediskey.Key(rediskey.Tag("stages"), "paused")

// MaxStageNameLen bounds the stage names Control accepts.
const MaxStageNameLen = 128

// ErrInvalidStage reports a stage name Control cannot store: empty or
// longer than MaxStageNameLen.
var ErrInvalidStage = errors.New("stream: invalid stage name")

// Control pauses and resumes stages across all their copies and reads their
// accounting (Conservation). It is stateless and safe for concurrent use.
type Control struct {
	rdb redis.UniversalClient
}

// NewControl returns the stage control over rdb.
func NewControl(rdb redis.UniversalClient) *Control { return &Control{rdb: rdb} }

func checkStageName(stage string) error {
	if stage == "" || len(stage) > MaxStageNameLen {
		return fmt.Errorf("%w: %q", ErrInvalidStage, stage)
	}
	return nil
}

// Pause pauses the stage named stage in every process within
// ControlInterval, keeping the time it was first paused. Callers check that
// the stage exists.
func (c *Control) Pause(ctx context.Context, stage string) error {
	if err := checkStageName(stage); err != nil {
		return err
	}
	if err := c.rdb.HSetNX(ctx, pausedKey, stage, time.Now().UTC().Format(time.RFC3339Nano)).Err(); err != nil {
		return fmt.Errorf("pause stage %s: %w", stage, err)
	}
	return nil
}

// Resume resumes the stage named stage: its copies read again within
// ControlInterval. Resuming a stage that is not paused does nothing.
func (c *Control) Resume(ctx context.Context, stage string) error {
	if err := checkStageName(stage); err != nil {
		return err
	}
	if err := c.rdb.HDel(ctx, pausedKey, stage).Err(); err != nil {
		return fmt.Errorf("resume stage %s: %w", stage, err)
	}
	return nil
}

// Paused returns every paused stage with the time it was paused (zero
// when unreadable).
func (c *Control) Paused(ctx context.Context) (map[string]time.Time, error) {
	all, err := c.rdb.HGetAll(ctx, pausedKey).Result()
	if err != nil {
		return nil, fmt.Errorf("paused stages: %w", err)
	}
	out := make(map[string]time.Time, len(all))
	for stage, at := range all {
		t, _ := time.Parse(time.RFC3339Nano, at)
		out[stage] = t
	}
	return out, nil
}

// pauseGate is a copy's view of its stage's paused state: set by the
// watcher, looked at by each partition's loop between batches.
type pauseGate struct {
	mu      sync.Mutex
	resumed chan struct{} // while paused, closed at the resume; nil while running
	parked  int           // partition loops waiting for the resume
}

// set records the paused state.
func (g *pauseGate) set(paused bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case paused && g.resumed == nil:
		g.resumed = make(chan struct{})
	case !paused && g.resumed != nil:
		close(g.resumed)
		g.resumed = nil
	}
}

// wait returns a channel closed on resume while the stage is paused, nil
// while it runs.
func (g *pauseGate) wait() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.resumed
}

// park notes a partition loop waiting while paused, out of n; it reports
// whether every one now waits. The returned func notes it leaving.
func (g *pauseGate) park(n int) (all bool, leave func()) {
	return enter(&g.mu, &g.parked, func() bool { return g.parked == n })
}

// enter counts a waiting partition loop in *waiting under mu and returns
// cond() then, and a func that counts it out.
func enter(mu *sync.Mutex, waiting *int, cond func() bool) (bool, func()) {
	mu.Lock()
	defer mu.Unlock()
	*waiting++
	return cond(), func() {
		mu.Lock()
		*waiting--
		mu.Unlock()
	}
}

// Paused reports whether this copy is paused: it saw its stage paused and
// every partition it consumes has stopped reading.
func (r *Runner) Paused() bool {
	r.gate.mu.Lock()
	defer r.gate.mu.Unlock()
	return r.gate.resumed != nil && r.gate.parked == len(r.cfg.Partitions)
}

// checkPaused reads the stage's paused state into the gate. On a Redis
// error the state is left as it was.
func (r *Runner) checkPaused(ctx context.Context) {
	paused, err := r.rdb.HExists(ctx, pausedKey, r.stage.Name).Result()
	if err != nil {
		if ctx.Err() == nil {
			r.tel.Logger.WarnContext(ctx, "reading the stage's paused state failed", "stage", r.stage.Name, "error", err)
		}
		return
	}
	if !paused && r.gate.wait() != nil {
		r.tel.Logger.InfoContext(ctx, "stage resumed", "stage", r.stage.Name, "consumer", r.cfg.Consumer)
	}
	r.gate.set(paused)
}

// watchPaused reads the paused state every ControlInterval until ctx ends.
func (r *Runner) watchPaused(ctx context.Context) {
	tick.EveryAfter(ctx, r.cfg.ControlInterval, func() { r.checkPaused(ctx) })
}

// holdWhilePaused returns at once while the stage runs; while it is
// paused, it acknowledges what the partition handled and waits for the
// resume or stop.
func (r *Runner) holdWhilePaused(stop, io context.Context, st *partitionState) {
	if resumed := r.gate.wait(); resumed != nil {
		r.idle(stop, io, st, resumed, r.gate.park, slog.LevelInfo, "stage paused: every partition stopped reading")
	}
}
