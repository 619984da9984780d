package console

import (
	"context"
	"errors"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/stream"
)

// Bounds of the stage sampler.
const (
	// minSampleGap is the least time between two samples of Redis; the
	// console's readers share the newest one.
	minSampleGap = time.Second
	// liveConsumer is how long since its last read a consumer counts as a
	// running copy.
	liveConsumer = 30 * time.Second
	// maxCount bounds an XRANGE that counts entries.
	maxCount = 10000
	// handlerDurationMetric is the stage handler duration histogram.
	handlerDurationMetric = "dropstream_stage_handler_duration_seconds"
)

// stageRef is a stage (or history stage) as the flows declare it: the
// group it reads its topic with.
type stageRef struct {
	Flow    string
	Name    string
	Group   string
	Topic   stream.Topic
	History bool
}

// StageStats are a stage's cluster-wide figures, read from Redis, with
// its p99 handler latency from this process's own histogram.
type StageStats struct {
	Flow    string `json:"flow"`
	Stage   string `json:"stage"`
	Topic   string `json:"topic"`
	Group   string `json:"group"`
	History bool   `json:"history,omitempty"`
	// Delivered is how many entries the group has read (entries-read, or
	// counted where Redis does not keep it, since the console started).
	Delivered int64 `json:"delivered"`
	// Throughput is entries read per second between the last two samples.
	Throughput float64 `json:"throughput"`
	// Lag is entries not yet delivered to the group; -1 when unknown.
	Lag int64 `json:"lag"`
	// Pending is entries delivered and not acknowledged; OldestPendingS
	// the age of the oldest of them, in seconds (0 when none).
	Pending        int64   `json:"pending"`
	OldestPendingS float64 `json:"oldest_pending_s"`
	DeadLetters    int64   `json:"dead_letters"`
	// Copies are the consumers that read within the last 30 seconds, over
	// every process.
	Copies int `json:"copies"`
	// P99Ms is the 99th percentile handler latency between the last two
	// samples, from this process's copies only; -1 when it ran none.
	P99Ms float64 `json:"p99_ms"`
	// Paused reports a stage paused in every process (stream.Control).
	Paused bool `json:"paused"`
	// Known is false while the stage's group does not exist yet.
	Known bool `json:"known"`
}

// sampler reads the stages' figures, at most once per minSampleGap.
type sampler struct {
	rdb     redis.UniversalClient
	metrics prometheus.Gatherer
	stages  []stageRef

	mu        sync.Mutex
	at        time.Time
	last      []StageStats
	marks     map[string]string    // stage/partition: last-delivered id at the previous sample
	delivered map[string]int64     // stage/partition: counted deliveries
	buckets   map[string][]float64 // stage: cumulative histogram counts
}

func newSampler(rdb redis.UniversalClient, metrics prometheus.Gatherer, stages []stageRef) *sampler {
	return &sampler{rdb: rdb, metrics: metrics, stages: stages, marks: map[string]string{},
		delivered: map[string]int64{}, buckets: map[string][]float64{}}
}

// stats returns the newest sample, taking one when the last is older than
// minSampleGap.
func (s *sampler) stats(ctx context.Context) ([]StageStats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.last != nil && now.Sub(s.at) < minSampleGap {
		return s.last, nil
	}
	p99 := s.latencies()
	paused, err := stream.NewControl(s.rdb).Paused(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]StageStats, 0, len(s.stages))
	for _, st := range s.stages {
		v, err := s.sample(ctx, st, now)
		if err != nil {
			return nil, err
		}
		_, v.Paused = paused[st.Name]
		v.P99Ms = -1
		if ms, ok := p99[st.Name]; ok {
			v.P99Ms = ms
		}
		out = append(out, v)
	}
	if s.last != nil {
		dt := now.Sub(s.at).Seconds()
		for i := range out {
			if prev := s.last[i]; prev.Known && out[i].Known && dt > 0 {
				out[i].Throughput = math.Round(float64(max(0, out[i].Delivered-prev.Delivered))/dt*10) / 10
			}
		}
	}
	s.at, s.last = now, out
	return out, nil
}

// sample reads one stage over all its partitions.
func (s *sampler) sample(ctx context.Context, st stageRef, now time.Time) (StageStats, error) {
	v := StageStats{Flow: st.Flow, Stage: st.Name, Topic: st.Topic.String(), Group: st.Group, History: st.History}
	live := map[string]bool{}
	for p := 0; p < st.Topic.Partitions; p++ {
		key := st.Topic.Stream(p)
		n, err := s.rdb.XLen(ctx, st.Topic.DeadLetterStream(p)).Result()
		if err != nil {
			return v, err
		}
		v.DeadLetters += n
		groups, err := s.rdb.XInfoGroups(ctx, key).Result()
		if err != nil {
			if isNoStream(err) {
				continue
			}
			return v, err
		}
		i := slices.IndexFunc(groups, func(g redis.XInfoGroup) bool { return g.Name == st.Group })
		if i < 0 {
			continue
		}
		g := &groups[i]
		v.Known = true
		v.Pending += g.Pending
		lag := g.Lag
		if lag < 0 || (g.EntriesRead == 0 && g.LastDeliveredID != "0-0") {
			lag = s.count(ctx, key, "("+g.LastDeliveredID, "+")
		}
		if lag < 0 || v.Lag < 0 {
			v.Lag = -1
		} else {
			v.Lag += lag
		}
		mk := st.Name + "/" + strconv.Itoa(p)
		prev, seen := s.marks[mk]
		if g.EntriesRead > 0 {
			v.Delivered += g.EntriesRead
		} else {
			// Redis keeps no entries-read count here (an embedded Redis):
			// count what the group read since the previous sample.
			if seen && prev != g.LastDeliveredID {
				from := "-"
				if prev != "0-0" {
					from = "(" + prev
				}
				s.delivered[mk] += max(0, s.count(ctx, key, from, g.LastDeliveredID))
			}
			v.Delivered += s.delivered[mk]
		}
		s.marks[mk] = g.LastDeliveredID
		if g.Pending > 0 {
			if sum, err := s.rdb.XPending(ctx, key, st.Group).Result(); err == nil && sum.Count > 0 {
				if at := (&stream.Message{ID: sum.Lower}).PublishedAt(); !at.IsZero() {
					v.OldestPendingS = max(v.OldestPendingS, math.Round(now.Sub(at).Seconds()*10)/10)
				}
			}
		}
		cs, err := s.rdb.XInfoConsumers(ctx, key, st.Group).Result()
		if err != nil {
			return v, err
		}
		for _, c := range cs {
			if c.Idle < liveConsumer {
				live[c.Name] = true
			}
		}
	}
	v.Copies = len(live)
	return v, nil
}

// count counts the entries of key between start and end, at most
// maxCount; -1 when Redis fails.
func (s *sampler) count(ctx context.Context, key, start, end string) int64 {
	xs, err := s.rdb.XRangeN(ctx, key, start, end, maxCount).Result()
	if err != nil {
		return -1
	}
	return int64(len(xs))
}

// latencies returns each stage's p99 handler latency in milliseconds
// since the previous sample, from the process's own histogram.
func (s *sampler) latencies() map[string]float64 {
	out := map[string]float64{}
	if s.metrics == nil {
		return out
	}
	fams, err := s.metrics.Gather()
	if err != nil {
		return out
	}
	// Per stage: the upper bounds, +Inf last, and the cumulative counts
	// summed over its series.
	bounds, counts := map[string][]float64{}, map[string][]float64{}
	for _, f := range fams {
		if f.GetName() != handlerDurationMetric {
			continue
		}
		for _, m := range f.GetMetric() {
			stage := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "stage" {
					stage = l.GetValue()
				}
			}
			h := m.GetHistogram()
			if stage == "" || h == nil {
				continue
			}
			if bounds[stage] == nil {
				for _, b := range h.GetBucket() {
					bounds[stage] = append(bounds[stage], b.GetUpperBound())
				}
				bounds[stage] = append(bounds[stage], math.Inf(1))
				counts[stage] = make([]float64, len(bounds[stage]))
			}
			c := counts[stage]
			for i, b := range h.GetBucket()[:min(len(h.GetBucket()), len(c)-1)] {
				c[i] += float64(b.GetCumulativeCount())
			}
			c[len(c)-1] += float64(h.GetSampleCount())
		}
	}
	for stage, c := range counts {
		delta := slices.Clone(c)
		if prev := s.buckets[stage]; len(prev) == len(c) {
			for i := range delta {
				delta[i] -= prev[i]
			}
		}
		if delta[len(delta)-1] <= 0 {
			delta = c // nothing new: the p99 since start
		}
		s.buckets[stage] = c
		out[stage] = quantile(0.99, bounds[stage], delta)
	}
	return out
}

// quantile interpolates the q quantile, in milliseconds, of a histogram's
// cumulative counts; the open last bucket answers its lower bound.
func quantile(q float64, bounds, cum []float64) float64 {
	total := cum[len(cum)-1]
	if total <= 0 {
		return 0
	}
	rank := q * total
	i := sort.Search(len(cum), func(i int) bool { return cum[i] >= rank })
	if i >= len(bounds)-1 {
		if len(bounds) < 2 {
			return 0
		}
		return bounds[len(bounds)-2] * 1000
	}
	lo, below := 0.0, 0.0
	if i > 0 {
		lo, below = bounds[i-1], cum[i-1]
	}
	in := cum[i] - below
	v := bounds[i]
	if in > 0 {
		v = lo + (bounds[i]-lo)*(rank-below)/in
	}
	return math.Round(v*1000*100) / 100
}

// isNoStream reports Redis' answer for a stream that does not exist yet.
func isNoStream(err error) bool {
	return err != nil && !errors.Is(err, context.Canceled) && strings.Contains(err.Error(), "no such key")
}
