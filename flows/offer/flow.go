package offer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/internal/quota"
	"github.com/dropstream/dropstream/internal/tenancy"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer/flowhistory"
)

// Flow is the sell-offer manager; safe for concurrent use, Close when done.
type Flow struct {
	cfg     Config
	rdb     redis.UniversalClient
	tel     stream.Telemetry
	log     *slog.Logger
	catalog *Catalog
	met     *metrics
	tracer  trace.Tracer
	views   map[string]*view
	history *recorder
	quota   *quota.Quota
}

// DemoOffers is how many sample offers the demo creates.
const DemoOffers = 60

// New builds the flow with the default handlers; it implements flow.Flow.
// The notifier must be built first, else flow.ErrNotBuilt.
func New(ctx context.Context, d flow.Deps) (*Flow, error) {
	nf, err := flow.Find[*notifier.Flow](d.Flows, notifier.Name)
	if err != nil {
		return nil, fmt.Errorf("offer: %w", err)
	}
	return NewWith(ctx, d.Redis, Config{Partitions: d.Settings.Partitions, FreshBound: d.Settings.Duration(VarFreshBound),
		MaxStandingPerCaller: d.Settings.Int(VarQuotaStanding), Notify: nf.Notify, Subscriber: func(ctx context.Context, v tenancy.View, id string) error {
			_, err := nf.Subscribers().GetIn(ctx, v, id)
			return err
		}}, d.Telemetry)
}

// The variables of the flow.
const (
	VarFreshBound    = "DROPSTREAM_OFFER_FRESH_BOUND"
	VarQuotaStanding = "DROPSTREAM_OFFER_QUOTA_STANDING"
)

// Vars are the variables New reads from the settings.
var Vars = []flow.Var{
	{Name: VarFreshBound, Kind: flow.Duration, Usage: "offer flow: a search never serves a cached result that may miss an offer change older than this (default 1s)"},
	{Name: VarQuotaStanding, Kind: flow.Int, Usage: "offer flow: standing searches each API caller may hold (default 100)"},
}

// NewWith validates cfg (after defaults) and starts the flow on tel.WithDefaults().
func NewWith(ctx context.Context, rdb redis.UniversalClient, cfg Config, tel stream.Telemetry) (*Flow, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := loadScripts(ctx, rdb); err != nil {
		return nil, err
	}
	tel = tel.WithDefaults()
	s := &Flow{cfg: cfg, rdb: rdb, tel: tel, log: tel.Logger, catalog: &Catalog{rdb: rdb, cfg: cfg}, met: newMetrics(tel.MeterProvider),
		tracer: tel.TracerProvider.Tracer(instrumentationScope), views: map[string]*view{}}
	for _, h := range cfg.Handlers {
		s.views[h.Tag] = &view{rdb: rdb, handler: h.Tag}
	}
	s.history = newRecorder(stream.NewPublisher(rdb, tel), cfg.HistoryTopic(), s.met, s.log)
	q, err := quota.New(rdb, "offer-standing-searches", cfg.MaxStandingPerCaller)
	if err != nil {
		return nil, err
	}
	s.quota = q.WithExists(func(ctx context.Context, id string) (bool, error) {
		n, err := rdb.Exists(ctx, standingMain(id)).Result()
		return n == 1, err
	})
	return s, nil
}

// Config returns the service's config with defaults.
func (s *Flow) Config() Config { return s.cfg }

// StandingQuota is the cap of standing searches per caller.
func (s *Flow) StandingQuota() *quota.Quota { return s.quota }

// Catalog returns the offer store.
func (s *Flow) Catalog() *Catalog { return s.catalog }

// Close flushes and stops the history recorder. It returns nil.
func (s *Flow) Close() error {
	s.history.close()
	return nil
}

// Describe declares the flow's stages, history, topics and demo offers.
func (s *Flow) Describe() flow.Description {
	d := flow.Description{
		Stages:   s.Stages(),
		Services: []flow.Service{{Name: ServiceFresh, Run: s.RunFresh}},
		Edges: []flow.Edge{{From: flow.FromAPI, Topic: s.cfg.HistoryTopic()},
			{From: ServiceFresh, Topic: notifier.RequestTopic(s.cfg.Partitions)}},
		History: []flow.History{flowhistory.Of(s.HistoryConfig(), s.tel)},
		Demo:    s.seedDemo,
	}
	for _, h := range s.cfg.Handlers {
		d.Edges = append(d.Edges, flow.Edge{From: flow.FromAPI, Topic: s.cfg.EvalTopic(h.Tag)})
	}
	return d
}

// seedDemo creates DemoOffers sample offers over every handler, once.
func (s *Flow) seedDemo(ctx context.Context) error {
	if _, err := s.catalog.Get(ctx, "o0"); !errors.Is(err, ErrNotFound) {
		return err
	}
	_, err := s.catalog.Put(ctx, SampleOffers(1, DemoOffers, 5, s.cfg.Handlers)...)
	return err
}

// Warm loads every handler's view, as a handler's first message would.
func (s *Flow) Warm(ctx context.Context) error {
	for _, h := range s.cfg.Handlers {
		v := s.views[h.Tag]
		v.mu.Lock()
		err := v.sync(ctx)
		v.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// Stages returns one stage per handler over its own fan-out topic.
func (s *Flow) Stages() []stream.Stage {
	out := make([]stream.Stage, 0, len(s.cfg.Handlers))
	for _, h := range s.cfg.Handlers {
		out = append(out, stream.Stage{Name: StageHandler(h.Tag), Topic: s.cfg.EvalTopic(h.Tag),
			Handler: s.handler(h.Tag, h.Kind), Config: s.cfg.Runner})
	}
	return out
}

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// str is v when it is a string, else "".
func str(v any) string {
	s, _ := v.(string)
	return s
}
