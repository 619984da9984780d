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
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/internal/tenancy"
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
	var errs []error
	if c.Redis == nil {
		errs = append(errs, errors.New("console: Redis is required"))
	}
	if len(c.Flows) == 0 {
		errs = append(errs, errors.New("console: Flows are required"))
	}
	errs = append(errs, validInterval(c.SampleInterval))
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
			group := s.Config.Group
			group = cmp.Or(group, s.Name)
			c.stages = append(c.stages, stageRef{Flow: f.Name, Name: s.Name, Group: group, Topic: s.Topic})
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
		if a.Flow != b.Flow {
			return slices.Index(names, a.Flow) - slices.Index(names, b.Flow)
		}
		return strings.Compare(a.Name, b.Name)
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
			Summary: a.summary, Handler: c.asset(a.name)})
	}
	c.registerRoutes(srv)
}

// asset serves an embedded file; the page revalidates it on every load.
func (c *Console) asset(name string) fiber.Handler {
	body, err := assets.ReadFile(path.Join("assets", name))
	if err != nil {
		panic("console: missing asset " + name)
	}
	types := map[string]string{".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
	ctype := types[path.Ext(name)]
	return func(ctx *fiber.Ctx) error {
		ctx.Set(fiber.HeaderContentType, ctype)
		ctx.Set(fiber.HeaderCacheControl, "no-cache")
		ctx.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'")
		return ctx.Send(body)
	}
}
