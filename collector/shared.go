package collector

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/internal/rediskey"
)

// Copies of the collector share in Redis each scope's poll gate
// (ds:{<raw partition tag>}:gate:<scope key>, package pollgate) and each
// source's health (ds:{src.<source id>}:health), so one copy publishes
// each transition.

// gateMargin is added to the request timeout for the time a copy holds a
// scope's gate while it polls it.
const gateMargin = 10 * time.Second

// healthKey is the Redis hash of a source's shared health.
func healthKey(sourceID string) string { return rediskey.Key(rediskey.Tag("src."+sourceID), "health") }

// healthFields are the fields healthScript returns, in order.
var healthFields = []string{"failures", "down", "paused", "last_success", "last_failure", "last_error", "last_run"}

// healthScript is SourceHealth.record on the shared health. KEYS health;
// ARGV ok, run id, finished ms, error, auth expired, DownAfter,
// fingerprint (go-redis sends a bool as 1 or 0). It returns the transition
// kind and the healthFields.
var healthScript = redis.NewScript(`
local h = KEYS[1]
if redis.call('HGET', h, 'fp') ~= ARGV[7] then redis.call('HSET', h, 'fp', ARGV[7], 'paused', '0') end
local down = redis.call('HGET', h, 'down') == '1'
local kind = ''
redis.call('HSET', h, 'last_run', ARGV[2])
if ARGV[1] == '1' then
  redis.call('HSET', h, 'failures', '0', 'last_success', ARGV[3])
  if down then redis.call('HSET', h, 'down', '0', 'flip_run', ARGV[2]); kind = 'open' end
else
  local n = redis.call('HINCRBY', h, 'failures', 1)
  redis.call('HSET', h, 'last_failure', ARGV[3], 'last_error', ARGV[4])
  if ARGV[5] == '1' then redis.call('HSET', h, 'paused', '1') end
  if not down and n >= tonumber(ARGV[6]) then redis.call('HSET', h, 'down', '1', 'flip_run', ARGV[2]); kind = 'close' end
end
return {kind, redis.call('HMGET', h, 'failures', 'down', 'paused', 'last_success', 'last_failure', 'last_error', 'last_run')}`)

// unflipScript undoes the flip of run ARGV[1], whose transition was not
// published. KEYS health; ARGV run id, down state ("0"/"1").
var unflipScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'flip_run') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'down', ARGV[2], 'flip_run', '')
return 1`)

// recordShared folds run into the source's shared health and returns the
// transition kind it causes and the health after it.
func (c *Collector) recordShared(ctx context.Context, src Source, fp string, run avail.RawRun, authExpired bool) (string, SourceHealth, error) {
	at := run.FinishedAt.UnixMilli()
	res, err := healthScript.Run(ctx, c.cfg.Shared, []string{healthKey(src.ID)}, run.Status == avail.StatusOK,
		run.RunID, at, run.Error, authExpired, c.cfg.DownAfter, fp).Slice()
	if err != nil {
		return "", SourceHealth{}, fmt.Errorf("record health of %s: %w", src.ID, err)
	}
	if len(res) != 2 {
		return "", SourceHealth{}, fmt.Errorf("record health of %s: reply %v", src.ID, res)
	}
	kind, _ := res[0].(string)
	vals, _ := res[1].([]any)
	return kind, healthOf(src.ID, vals), nil
}

// healthReply is a source's shared health from the reply of its HMGET,
// and false when no copy has polled it yet.
func healthReply(id string, cmd *redis.SliceCmd) (SourceHealth, bool, error) {
	vals, err := cmd.Result()
	if err != nil {
		return SourceHealth{}, false, fmt.Errorf("health of %s: %w", clip.Marked(id, maxQuoted), err)
	}
	if vals[len(vals)-1] == nil {
		return SourceHealth{}, false, nil
	}
	return healthOf(id, vals), true, nil
}

// healthOf decodes the values of healthFields.
func healthOf(id string, vals []any) SourceHealth {
	str := func(i int) string {
		if i < len(vals) {
			s, _ := vals[i].(string)
			return s
		}
		return ""
	}
	ms := func(i int) time.Time {
		n, err := strconv.ParseInt(str(i), 10, 64)
		if err != nil || n == 0 {
			return time.Time{}
		}
		return time.UnixMilli(n).UTC()
	}
	failures, _ := strconv.Atoi(str(0))
	h := SourceHealth{SourceID: id, ConsecutiveFailures: failures, Down: str(1) == "1", Paused: str(2) == "1",
		LastSuccess: ms(3), LastFailure: ms(4), LastError: str(5), LastRunID: str(6)}
	h.Status = h.status()
	return h
}

// deleteHealth forgets a source's shared health.
func (s *Store) deleteHealth(ctx context.Context, id string) error {
	if err := s.rdb.Del(ctx, healthKey(id)).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("delete health of %s: %w", clip.Marked(id, maxQuoted), err)
	}
	return nil
}

// Health statuses of a source.
const (
	// StatusUp: the source's last runs are fine, or it has failed fewer
	// than DownAfter times in a row.
	StatusUp = "up"
	// StatusDown: the source has failed DownAfter or more times in a row.
	StatusDown = "down"
	// StatusAuthExpired: the provider refused the credentials; the source is
	// paused until its configuration changes, and counts as down.
	StatusAuthExpired = "auth_expired"
)

// SourceHealth is what the collector knows of a source's recent polls.
type SourceHealth struct {
	SourceID string `json:"source_id"`
	// Status is StatusUp, StatusDown or StatusAuthExpired.
	Status string `json:"status"`
	// ConsecutiveFailures counts failed runs since the last successful one.
	ConsecutiveFailures int       `json:"consecutive_failures"`
	LastSuccess         time.Time `json:"last_success,omitzero"`
	LastFailure         time.Time `json:"last_failure,omitzero"`
	// LastError is the error of the last failed run.
	LastError string `json:"last_error,omitempty"`
	// LastRunID is the id of the last run, failed or not.
	LastRunID string `json:"last_run_id,omitempty"`
	// Down reports a source that went down and has not come up since (it
	// may also be paused for expired credentials).
	Down bool `json:"down"`
	// Paused reports a source not polled because its credentials expired.
	Paused bool `json:"paused"`
}

func (h *SourceHealth) status() string {
	switch {
	case h.Paused:
		return StatusAuthExpired
	case h.Down:
		return StatusDown
	}
	return StatusUp
}

// record folds one run's outcome into the health and returns the source
// transition it causes: avail.KindClose (down), avail.KindOpen (up) or "".
func (h *SourceHealth) record(ok bool, runID string, at time.Time, errText string, authExpired bool, downAfter int) string {
	h.LastRunID = runID
	kind := ""
	if ok {
		h.ConsecutiveFailures = 0
		h.LastSuccess = at
		if h.Down {
			h.Down = false
			kind = avail.KindOpen
		}
	} else {
		h.ConsecutiveFailures++
		h.LastFailure = at
		h.LastError = errText
		if authExpired {
			h.Paused = true
		}
		// A refused credential pauses the source: it is blind from now on,
		// whatever DownAfter says, so its watchers are told at once.
		if !h.Down && (h.ConsecutiveFailures >= downAfter || authExpired) {
			h.Down = true
			kind = avail.KindClose
		}
	}
	h.Status = h.status()
	return kind
}

// sourceTransition builds the transition of a source going down (close) or
// up (open), seen by run runID at runAt.
func sourceTransition(src Source, h SourceHealth, kind, runID string, runAt time.Time, traceID string) avail.Transition {
	key := avail.SourceKey(src.ID)
	attrs := map[string]string{"status": h.Status, "consecutive_failures": strconv.Itoa(h.ConsecutiveFailures)}
	if kind == avail.KindClose && h.LastError != "" {
		attrs["error"] = h.LastError
	}
	return avail.Transition{
		EventID:  avail.EventID(runID, key, kind, true),
		Entity:   avail.Entity{Key: key, Kind: avail.EntitySource, Provider: src.Provider, Venue: src.ID, Attrs: attrs},
		ScopeKey: key,
		SourceID: src.ID,
		Kind:     kind,
		Stable:   true,
		Notify:   true,
		RunID:    runID,
		RunAt:    runAt,
		LastSeen: h.LastSuccess,
		TraceID:  traceID,
	}
}
