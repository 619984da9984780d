package checkout

import (
	"context"
	"errors"
	"log/slog"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer/flowhistory"
)

// The flow's loops beside its stages.
const (
	// ServiceSweeper drives attempts left open to a final status
	// (Flow.RunSweeper); one copy is enough, more are harmless.
	ServiceSweeper = "checkout-sweeper"
	WaiterName     = "checkout-waiter" // wakes a process's checkout calls (Flow.Run).
)

// The flow's variables: durations setting Config fields.
const (
	VarTimeout              = "DROPSTREAM_CHECKOUT_TIMEOUT"
	VarSweepInterval        = "DROPSTREAM_CHECKOUT_SWEEP_INTERVAL"
	VarSweepAge             = "DROPSTREAM_CHECKOUT_SWEEP_AGE"
	VarAbandonAge           = "DROPSTREAM_CHECKOUT_ABANDON_AGE"
	VarConservationInterval = "DROPSTREAM_CHECKOUT_CONSERVATION_INTERVAL" // sets Config.ConservationInterval.
)

// Vars are the variables New reads from the settings.
var Vars = []flow.Var{
	{Name: VarTimeout, Kind: flow.Duration, Usage: "checkout flow: how long a checkout call waits for its saga before giving the attempt up (compensated, 400) (default 30s)"},
	{Name: VarSweepInterval, Kind: flow.Duration, Usage: "checkout flow: how often the checkout-sweeper service looks for attempts left open (default 10s)"},
	{Name: VarSweepAge, Kind: flow.Duration, Usage: "checkout flow: age of an open attempt whose missing commands the sweeper sends again (default 30s)"},
	{Name: VarAbandonAge, Kind: flow.Duration, Usage: "checkout flow: age of a pending attempt whose silent parts the sweeper gives up and compensates (default 5m)"},
	{Name: VarConservationInterval, Kind: flow.Duration, Usage: "checkout flow: how often the checkout-sweeper service checks that stock and credit are conserved, reading every item and user (default 1m)"},
}

// Flow is the checkout flow: store, stages, sweeper, checkout and waiter.
type Flow struct {
	rdb    redis.UniversalClient
	cfg    Config
	store  *Store
	keys   Keys
	topics Topics
	pub    *stream.Publisher
	waiter *Waiter
	log    *slog.Logger
	tracer trace.Tracer
	cons   *conservationGauge
	// ch holds the saga records of attempts gone from Redis (nil: none).
	ch *clickhouse.Client
}

// New builds the flow from d and Vars; it implements flow.Flow.
func New(_ context.Context, d flow.Deps) (*Flow, error) {
	s := d.Settings
	f, err := NewWith(d.Redis, d.Publisher, Config{Partitions: s.Partitions, Timeout: s.Duration(VarTimeout),
		SweepInterval: s.Duration(VarSweepInterval), SweepAge: s.Duration(VarSweepAge),
		AbandonAge: s.Duration(VarAbandonAge), ConservationInterval: s.Duration(VarConservationInterval),
		Wait: s.RedisWait}, d.Telemetry)
	if err != nil {
		return nil, err
	}
	f.ch = d.ClickHouse
	return f, nil
}

// NewWith returns the flow over rdb and pub with cfg (defaulted); nil
// fields of tel take the OpenTelemetry globals and slog.Default.
func NewWith(rdb redis.UniversalClient, pub *stream.Publisher, cfg Config, tel stream.Telemetry) (*Flow, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tel = tel.WithDefaults()
	log := tel.Logger
	cons, err := newConservationGauge(tel.MeterProvider)
	if err != nil {
		return nil, err
	}
	w := NewWaiter(rdb, log)
	w.recheck = cfg.Recheck
	store := NewStore(rdb, cfg.Partitions)
	store.retryFor = cfg.RetryFor
	store.wait = cfg.Wait
	return &Flow{rdb: rdb, cfg: cfg, store: store, keys: NewKeys(cfg.Partitions),
		topics: NewTopics(cfg.Partitions), pub: pub, waiter: w, log: log, cons: cons,
		tracer: tel.TracerProvider.Tracer(instrumentationScope)}, nil
}

// Store returns the items, users and orders.
func (s *Flow) Store() *Store { return s.store }

// Topics returns the flow's topics.
func (s *Flow) Topics() Topics { return s.topics }

// Config returns the defaulted configuration.
func (s *Flow) Config() Config { return s.cfg }

// Run runs the process's waiter until ctx ends; it fails only if the
// first subscribe fails. Run RunSweeper somewhere too.
func (s *Flow) Run(ctx context.Context) error { return s.waiter.Run(ctx) }

// Ready is closed once the waiter listens for outcomes.
func (s *Flow) Ready() <-chan struct{} { return s.waiter.Ready() }

// Describe declares the flow's stages, services, history, topics and demo.
func (s *Flow) Describe() flow.Description {
	t := s.topics
	return flow.Description{
		Stages:   s.Stages(),
		Services: []flow.Service{{Name: ServiceSweeper, Run: s.RunSweeper}},
		Waiters:  []flow.Service{{Name: WaiterName, Run: s.Run}},
		Edges: []flow.Edge{
			// Stages append saga records and send compensations.
			{From: StageStock, Topic: t.Stock}, {From: StageStock, Topic: t.Payment}, {From: StageStock, Topic: t.Sagas},
			{From: StagePayment, Topic: t.Stock}, {From: StagePayment, Topic: t.Payment}, {From: StagePayment, Topic: t.Sagas},
			{From: ServiceSweeper, Topic: t.Stock}, {From: ServiceSweeper, Topic: t.Payment}, {From: ServiceSweeper, Topic: t.Sagas},
			// A checkout sends commands; one given up records its saga.
			{From: flow.FromAPI, Topic: t.Stock}, {From: flow.FromAPI, Topic: t.Payment}, {From: flow.FromAPI, Topic: t.Sagas},
		},
		History: []flow.History{flowhistory.Of(s.HistoryConfig(), stream.Telemetry{Logger: s.log})},
		Demo:    s.seedDemo,
		Events:  s.events,
	}
}

// seedDemo creates ten items, users and orders for the demo, once.
func (s *Flow) seedDemo(ctx context.Context) error {
	st := s.store
	if _, _, err := st.FindItem(ctx, "0"); !errors.Is(err, ErrNotFound) {
		return err
	}
	return errors.Join(st.BatchInitItems(ctx, 10, 100, 10), st.BatchInitUsers(ctx, 10, 1000), st.BatchInitOrders(ctx, 10, 10, 10, 10))
}

// Close unregisters the flow's gauges; it holds nothing else of its own.
func (s *Flow) Close() error { return s.cons.reg.Unregister() }
