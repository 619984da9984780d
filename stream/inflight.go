package stream

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/dropstream/dropstream/internal/script"
	"github.com/dropstream/dropstream/internal/tick"
)

// In-flight batches. While a partition works on a batch, a keeper
// acknowledges its handled messages and resets the idle time of the rest
// every keepEvery, so no live copy claims them even past ClaimIdle. A batch
// whose handler call outlasts the longest delivery is let go stale.

// keepEvery returns how often a batch in hand is kept fresh: well within
// ClaimIdle, and at most 10s apart (a keep costs Redis ~1 µs a message).
func (c RunnerConfig) keepEvery() time.Duration {
	return min(c.ClaimIdle/4, 10*time.Second)
}

// refreshScript resets the idle time of the entries ARGV[5..] (between
// ARGV[3] and ARGV[4]) still pending to consumer ARGV[2] of group ARGV[1] on
// stream KEYS[1], keeping their delivery count, with one XCLAIM per count;
// it returns the ids that are not.
var refreshScript = script.New(`
local want = {}
for i = 5, #ARGV do want[ARGV[i]] = true end
local by_count = {} -- delivery count -> ids of ours to claim back
local from = ARGV[3]
while true do
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], from, ARGV[4], 1000, ARGV[2])
  for _, e in ipairs(p) do
    if want[e[1]] then
      want[e[1]] = nil
      local ids = by_count[e[4]]
      if not ids then
        ids = {}
        by_count[e[4]] = ids
      end
      ids[#ids + 1] = e[1]
    end
  end
  if #p < 1000 then break end
  from = p[#p][1] -- read again first on the next page, and skipped: not wanted any more
end
for count, ids in pairs(by_count) do
  for i = 1, #ids, 1000 do
    local args = {'XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0}
    for j = i, math.min(i + 999, #ids) do args[#args + 1] = ids[j] end
    args[#args + 1] = 'RETRYCOUNT'
    args[#args + 1] = count
    args[#args + 1] = 'JUSTID'
    redis.call(unpack(args))
  end
end
local lost = {}
for id in pairs(want) do lost[#lost + 1] = id end
return lost`)

// inflight is a batch in hand on one partition.
type inflight struct {
	r      *Runner
	stream string
	p      int

	mu   sync.Mutex
	open map[string]bool // read, not settled yet
	lost map[string]bool // now another consumer's
	acks ackSet          // settled, not acknowledged yet
	busy time.Time       // when the handler call in progress started; zero between calls

	// Of the partition's goroutine only: when the batch of n was read, and
	// the messages whose handling started more than ClaimIdle/2 later.
	began               time.Time
	n, late             int
	firstLate, lastLate string

	stop context.CancelFunc // ends the keeper
	done chan struct{}      // closed once the keeper has returned
}

// keep starts keeping the batch msgs of st fresh until end is called.
func (r *Runner) keep(ctx context.Context, st *partitionState, msgs []*Message) *inflight {
	keeping, stop := context.WithCancel(ctx)
	f := &inflight{r: r, stream: st.stream, p: st.p, open: make(map[string]bool, len(msgs)), lost: map[string]bool{},
		began: time.Now(), n: len(msgs), stop: stop, done: make(chan struct{})}
	for _, m := range msgs {
		f.open[m.ID] = true
	}
	go func() {
		defer close(f.done)
		tick.EveryAfter(keeping, r.cfg.keepEvery(), func() { f.refresh(ctx) })
	}()
	return f
}

// refresh acknowledges the handled messages and keeps the open ones fresh.
func (f *inflight) refresh(ctx context.Context) {
	f.mu.Lock()
	acks := f.acks
	f.acks = ackSet{}
	var ids []string
	if stuck := !f.busy.IsZero() && time.Since(f.busy) > f.r.cfg.worstDelivery(); !stuck {
		ids = slices.Collect(maps.Keys(f.open))
	}
	f.mu.Unlock()
	if acks.len() > 0 {
		f.r.ackFailed(ctx, f.stream, &acks, f.r.ack(ctx, f.p, &acks))
	}
	if len(ids) == 0 {
		return
	}
	args := append(make([]any, 0, 4+len(ids)), f.r.cfg.Group, f.r.cfg.Consumer, slices.MinFunc(ids, compareIDs), slices.MaxFunc(ids, compareIDs))
	for _, id := range ids {
		args = append(args, id)
	}
	lost, err := refreshScript.Run(ctx, f.r.rdb, []string{f.stream}, args...).StringSlice()
	if err != nil {
		f.r.tel.Logger.WarnContext(ctx, "keeping a slow batch failed; its messages may be claimed by another copy",
			"stage", f.r.stage.Name, "stream", f.stream, "error", err)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var taken []string
	for _, id := range lost {
		if f.open[id] {
			delete(f.open, id)
			f.lost[id] = true
			taken = append(taken, id)
		}
	}
	if len(taken) > 0 {
		f.r.tel.Logger.WarnContext(ctx, "slow batch: messages taken over by another copy are left to it",
			"stage", f.r.stage.Name, "stream", f.stream, "count", len(taken), "first_id", taken[0])
	}
}

// take reports whether the message is still this copy's to handle; if
// so, a handler call starts now.
func (f *inflight) take(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lost[id] {
		return false
	}
	f.busy = time.Now()
	return true
}

// ackNone settles a message without acknowledging it.
const ackNone ackKind = -1

// settled records the message as settled; a kind other than ackNone
// queues its acknowledgement.
func (f *inflight) settled(id string, kind ackKind) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.open, id)
	f.busy = time.Time{}
	if kind != ackNone {
		f.acks.add(kind, id)
	}
}

// started notes that the handling of message id starts now.
func (f *inflight) started(id string) {
	if time.Since(f.began) <= f.r.cfg.ClaimIdle/2 {
		return
	}
	if f.late == 0 {
		f.firstLate = id
	}
	f.late++
	f.lastLate = id
}

// end stops keeping the batch, warns of the messages that started late (a
// stalled keeper would let them go) and returns the acks still to send.
func (f *inflight) end(ctx context.Context) *ackSet {
	f.stop()
	<-f.done
	if f.late > 0 {
		f.r.tel.Logger.WarnContext(ctx, "slow batch: messages started more than claim_idle/2 after the read; only keeping them fresh stops another copy from claiming them",
			"stage", f.r.stage.Name, "stream", f.stream, "messages", f.n, "late", f.late, "first_late_id", f.firstLate,
			"last_late_id", f.lastLate, "took", time.Since(f.began), "claim_idle", f.r.cfg.ClaimIdle)
	}
	return &f.acks
}
