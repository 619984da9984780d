// Package console is the live console: an embedded page at /console and
// the JSON routes under /v1/console/ it reads.
package console

import (
	"cmp"
	"context"
	"embed"
	"errors"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/internal/bounds"
	"github.com/dropstream/dropstream/internal/tenancy"
	"github.com/dropstream/dropstream/internal/tick"
	"github.com/dropstream/dropstream/otel/spanbuffer"
	"github.com/dropstream/dropstream/stream"
)

// Path is where the page is served.
const Path = "/console"

//go:embed assets
var assets embed.FS

// Flow is one flow as the console shows it.
type Flow struct {
	Name string
	Desc flow.Description
}

// Config is what the console reads. Redis and Flows are required.
type Config struct {
	Redis redis.UniversalClient
	// Flows are the binary's flows, in their order.
	Flows []Flow
	// Metrics is the process's Prometheus registry, for the p99 handler
	// latency of the stages it runs; nil shows none.
	Metrics prometheus.Gatherer
	// Traces is the process's buffer of recent traces; nil shows none.
	Traces *spanbuffer.Buffer
	// JaegerUIURL, when set, is the trace UI traces link to.
	JaegerUIURL string
	// SampleInterval is how often Run samples the stages for the charts;
	// at least 1s, default 10s.
	SampleInterval time.Duration
}

// Validate reports every missing field.
func (c Config) Validate() error {
	errs := bounds.Require(nil, c.Redis != nil, "console: Redis is required")
	errs = bounds.Require(errs, len(c.Flows) > 0, "console: Flows are required")
	errs = bounds.Require(errs, c.SampleInterval == 0 || c.SampleInterval >= MinSampleInterval,
		"console: SampleInterval %s: want at least %s", c.SampleInterval, MinSampleInterval)
	return errors.Join(errs...)
}

// Console serves the page and its routes.
type Console struct {
	cfg     Config
	graph   flow.Graph
	stages  []stageRef
	topics  map[string]stream.Topic
	events  map[string]func(ctx context.Context, v tenancy.View, limit int) ([]flow.Event, error)
	sampler *sampler
	series  *series
	dead    *stream.DeadLetters
}

// New builds the console over cfg.
func New(cfg Config) (*Console, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Console{cfg: cfg, topics: map[string]stream.Topic{}, events: map[string]func(context.Context, tenancy.View, int) ([]flow.Event, error){},
		dead: stream.NewDeadLetters(cfg.Redis)}
	names := make([]string, 0, len(cfg.Flows))
	descs := make([]flow.Description, 0, len(cfg.Flows))
	for _, f := range cfg.Flows {
		names = append(names, f.Name)
		descs = append(descs, f.Desc)
		for _, s := range f.Desc.Stages {
			c.stages = append(c.stages, stageRef{Flow: f.Name, Name: s.Name, Group: cmp.Or(s.Config.Group, s.Name), Topic: s.Topic})
			c.topics[s.Topic.String()] = s.Topic
		}
		for _, h := range f.Desc.History {
			for _, g := range h.Groups {
				c.stages = append(c.stages, stageRef{Flow: f.Name, Name: g.Name, Group: g.Name, Topic: g.Topic, History: true})
				c.topics[g.Topic.String()] = g.Topic
			}
		}
		if f.Desc.Events != nil {
			c.events[f.Name] = f.Desc.Events
		}
	}
	slices.SortFunc(c.stages, func(a, b stageRef) int {
		return cmp.Or(slices.Index(names, a.Flow)-slices.Index(names, b.Flow), strings.Compare(a.Name, b.Name))
	})
	c.graph = flow.NewGraph(names, descs)
	c.sampler = newSampler(cfg.Redis, cfg.Metrics, c.stages)
	c.series = newSeries(cmp.Or(cfg.SampleInterval, DefaultSampleInterval), time.Now)
	return c, nil
}

// Register serves the page at Path (open: it holds no data) and the JSON
// routes (read scope; dead-letter actions need admin).
func (c *Console) Register(srv *api.Server) {
	// The page and its two assets are documented operations like every
	// route ("/console/" is "/console": routing is not strict).
	for _, a := range []struct{ path, name, ctype, summary string }{
		{Path, "index.html", "text/html", "The console: the flow graph with live figures, dead letters, events, traces and the availability board"},
		{Path + "/app.js", "app.js", "text/javascript", "The console's script"},
		{Path + "/app.css", "app.css", "text/css", "The console's style sheet"},
	} {
		srv.Handle(api.Operation{Method: "GET", Path: a.path, Tag: "console", Public: true, Class: api.ClassPublic, ContentType: a.ctype,
			Summary: a.summary, Handler: c.asset(a.name, a.ctype+"; charset=utf-8")})
	}
	c.registerRoutes(srv)
}

// asset serves an embedded file as ctype; the page revalidates it on every load.
func (c *Console) asset(name, ctype string) fiber.Handler {
	body, err := assets.ReadFile(path.Join("assets", name))
	if err != nil {
		panic("console: missing asset " + name)
	}
	return func(ctx *fiber.Ctx) error {
		ctx.Set(fiber.HeaderContentType, ctype)
		ctx.Set(fiber.HeaderCacheControl, "no-cache")
		ctx.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'")
		return ctx.Send(body)
	}
}

// Bounds of the charts' samples.
const (
	// DefaultSampleInterval is Config.SampleInterval when unset.
	DefaultSampleInterval = 10 * time.Second
	// MinSampleInterval is the shortest Config.SampleInterval: the stage
	// sampler reads Redis at most once a second.
	MinSampleInterval = minSampleGap
	// SeriesWindow is how far back the charts reach.
	SeriesWindow = 15 * time.Minute
)

// seriesView is GET /v1/console/series: the samples of the last 15
// minutes, oldest first (a bounded list: one per sample interval).
type seriesView struct {
	IntervalS float64 `json:"interval_s"`
	WindowS   float64 `json:"window_s"`
	// At are the samples' times; every stage's lists follow them.
	At     []time.Time   `json:"at"`
	Stages []stageSeries `json:"stages"`
	// Transitions are the availability board's openings and closings per
	// minute (raw flips), the last 15 minutes, oldest first.
	Transitions []minuteCount `json:"transitions"`
}

// stageSeries is one stage's figures per sample: throughput, lag, pending
// cluster-wide, P99Ms this process's (-1 where unknown).
type stageSeries struct {
	Flow       string    `json:"flow"`
	Stage      string    `json:"stage"`
	History    bool      `json:"history,omitempty"`
	Throughput []float64 `json:"throughput"`
	Lag        []int64   `json:"lag"`
	Pending    []int64   `json:"pending"`
	P99Ms      []float64 `json:"p99_ms"`
}

// minuteCount is the transitions of one minute, starting At.
type minuteCount struct {
	At     time.Time `json:"at"`
	Opened int       `json:"opened"`
	Closed int       `json:"closed"`
}

// snapshot is one sample of every stage, in the console's stage order.
type snapshot struct {
	at     time.Time
	points []StageStats // the sampler's, never changed
}

// series keeps the samples of the last SeriesWindow (keep of them) and
// the transitions per minute.
type series struct {
	interval time.Duration
	now      func() time.Time
	keep     int

	mu      sync.Mutex
	samples []snapshot                 // oldest first
	minutes map[int64]*minuteCount     // unix minute
	seen    map[string]map[string]bool // flow: transition ids of its previous read
}

func newSeries(interval time.Duration, now func() time.Time) *series {
	return &series{interval: interval, now: now, keep: int(SeriesWindow/interval) + 1, minutes: map[int64]*minuteCount{}, seen: map[string]map[string]bool{}}
}

// record keeps a sample of the stages taken at at.
func (s *series) record(at time.Time, items []StageStats) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples = append(s.samples, snapshot{at: at, points: items})
	s.samples = slices.Delete(s.samples, 0, max(0, len(s.samples)-s.keep))
}

// countTransitions counts the raw openings and closings among flow name's
// newest events that its previous read did not hold.
func (s *series) countTransitions(name string, evs []flow.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := make(map[string]bool, len(evs))
	from := s.now().Add(-SeriesWindow).Truncate(time.Minute)
	for _, e := range evs {
		if (e.Change != "open" && e.Change != "close") || e.ID == "" {
			continue // not a raw flip of state
		}
		seen[e.ID] = true
		if s.seen[name][e.ID] || e.Time.Before(from) {
			continue
		}
		m := e.Time.Truncate(time.Minute)
		c := s.minutes[m.Unix()/60]
		if c == nil {
			c = &minuteCount{At: m.UTC()}
			s.minutes[m.Unix()/60] = c
		}
		if e.Change == "open" {
			c.Opened++
		} else {
			c.Closed++
		}
	}
	s.seen[name] = seen
	for k, c := range s.minutes {
		if c.At.Before(from) {
			delete(s.minutes, k)
		}
	}
}

// view returns the samples of the last SeriesWindow for stages, the
// console's stage list, and the 15 minutes of transitions up to now.
func (s *series) view(stages []stageRef) seriesView {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	from := now.Add(-SeriesWindow)
	v := seriesView{IntervalS: s.interval.Seconds(), WindowS: SeriesWindow.Seconds(), At: []time.Time{},
		Stages: make([]stageSeries, len(stages)), Transitions: make([]minuteCount, 0, 15)}
	for i, st := range stages {
		v.Stages[i] = stageSeries{Flow: st.Flow, Stage: st.Name, History: st.History,
			Throughput: []float64{}, Lag: []int64{}, Pending: []int64{}, P99Ms: []float64{}}
	}
	for _, snap := range s.samples {
		if snap.at.Before(from) || len(snap.points) != len(stages) {
			continue
		}
		v.At = append(v.At, snap.at.UTC())
		for i, p := range snap.points {
			st := &v.Stages[i]
			st.Throughput, st.Lag = append(st.Throughput, p.Throughput), append(st.Lag, p.Lag)
			st.Pending, st.P99Ms = append(st.Pending, p.Pending), append(st.P99Ms, p.P99Ms)
		}
	}
	last := now.Truncate(time.Minute)
	for m := last.Add(-14 * time.Minute); !m.After(last); m = m.Add(time.Minute) {
		c := minuteCount{At: m.UTC()}
		if got := s.minutes[m.Unix()/60]; got != nil {
			c = *got
		}
		v.Transitions = append(v.Transitions, c)
	}
	return v
}

// Run samples stages and transitions every SampleInterval until ctx ends;
// a failed sample leaves a gap.
func (c *Console) Run(ctx context.Context) error {
	tick.Every(ctx, c.series.interval, func() { c.sampleSeries(ctx) })
	return nil
}

// sampleSeries takes one sample: the stages' figures, and the newest
// events of the flows that list them (as an admin sees them).
func (c *Console) sampleSeries(ctx context.Context) {
	if items, err := c.sampler.stats(ctx); err == nil {
		c.series.record(c.series.now(), items)
	}
	for name, fn := range c.events {
		if evs, err := fn(ctx, tenancy.View{All: true}, flow.MaxEvents); err == nil {
			c.series.countTransitions(name, evs)
		}
	}
}
