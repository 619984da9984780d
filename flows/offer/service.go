package offer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"

	"github.com/redis/go-redis/v9"
	gotel "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/dropstream/dropstream/stream"
)

// Service is the sell-offer manager of seed 002 with its handlers: the
// catalog, searches answered from the logical result cache or fanned out
// to the handler stages, the orderPrice cache, and the search history. It
// is safe for concurrent use; call Close when done.
type Service struct {
	cfg     Config
	rdb     redis.UniversalClient
	tel     stream.Telemetry
	log     *slog.Logger
	catalog *Catalog
	met     *metrics
	tracer  trace.Tracer
	prop    propagation.TextMapPropagator
	views   map[string]*view
	history *recorder
}

// New validates cfg (after defaults) and starts the history recorder. tel's
// nil fields take the OpenTelemetry globals and slog.Default.
func New(ctx context.Context, rdb redis.UniversalClient, cfg Config, tel stream.Telemetry) (*Service, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	catalog, err := NewCatalog(rdb, cfg)
	if err != nil {
		return nil, err
	}
	if err := loadScripts(ctx, rdb); err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, rdb: rdb, tel: tel, log: tel.Logger, catalog: catalog, met: newMetrics(tel.MeterProvider),
		prop: tel.Propagator, views: map[string]*view{}}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.prop == nil {
		s.prop = gotel.GetTextMapPropagator()
	}
	tp := tel.TracerProvider
	if tp == nil {
		tp = gotel.GetTracerProvider()
	}
	s.tracer = tp.Tracer(instrumentationScope)
	for _, h := range cfg.Handlers {
		s.views[h.Tag] = newView(rdb, h.Tag)
	}
	s.history = newRecorder(stream.NewPublisher(rdb, tel), cfg.HistoryTopic(), s.met, s.log)
	return s, nil
}

// Config returns the service's config with defaults.
func (s *Service) Config() Config { return s.cfg }

// Catalog returns the offer store.
func (s *Service) Catalog() *Catalog { return s.catalog }

// Close flushes and stops the history recorder.
func (s *Service) Close() { s.history.close() }

// Warm loads every handler's view of its offers, which the first message
// of a handler copy does otherwise.
func (s *Service) Warm(ctx context.Context) error {
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

// Stages returns one stage per handler, "offer-handler-<tag>", each over
// its own fan-out topic.
func (s *Service) Stages() []stream.Stage {
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
