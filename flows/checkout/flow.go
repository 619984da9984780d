package checkout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/internal/rediskey"
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

// NewWith returns the flow over rdb and pub with cfg (defaulted) and tel.WithDefaults().
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
	keys := NewKeys(cfg.Partitions)
	return &Flow{rdb: rdb, cfg: cfg, store: &Store{rdb: rdb, keys: keys, retryFor: cfg.RetryFor, wait: cfg.Wait}, keys: keys,
		topics: NewTopics(cfg.Partitions), pub: pub, waiter: newWaiter(rdb, log, cfg.Recheck), log: log, cons: cons,
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
	d := flow.Description{
		Stages:   s.Stages(),
		Services: []flow.Service{{Name: ServiceSweeper, Run: s.RunSweeper}},
		Waiters:  []flow.Service{{Name: WaiterName, Run: s.Run}},
		History:  []flow.History{flowhistory.Of(s.HistoryConfig(), stream.Telemetry{Logger: s.log})},
		Demo:     s.seedDemo,
		Events:   s.events,
	}
	// The stages, the sweeper and a checkout send commands (and
	// compensations) and record sagas.
	for _, from := range []string{StageStock, StagePayment, ServiceSweeper, flow.FromAPI} {
		for _, t := range []stream.Topic{s.topics.Stock, s.topics.Payment, s.topics.Sagas} {
			d.Edges = append(d.Edges, flow.Edge{From: from, Topic: t})
		}
	}
	return d
}

// seedDemo creates ten items, users and orders for the demo, once.
func (s *Flow) seedDemo(ctx context.Context) error {
	st := s.store
	if _, _, err := st.FindItem(ctx, "0"); !errors.Is(err, ErrNotFound) {
		return err
	}
	return errors.Join(st.BatchInitItems(ctx, 10, 100, 10), st.BatchInitUsers(ctx, 10, 1000), st.BatchInitOrders(ctx, 10, 10, 10, 10))
}

// Close returns nil: the flow holds nothing of its own to release.
func (s *Flow) Close() error { return nil }

// Metric names of the flow (Prometheus names in parentheses).
const (
	// MetricConservationDrift is the last check's Drift by kind ("stock", "credit").
	MetricConservationDrift = "dropstream.checkout.conservation.drift"
	// MetricConservationDrifting counts items or users off balance, by kind.
	MetricConservationDrifting = "dropstream.checkout.conservation.drifting"
)

// Kinds of conservation: the attribute "kind" of the drift metrics.
const (
	KindStock  = "stock"
	KindCredit = "credit"
)

var keyKind = attribute.Key("kind")

// Drift is what a conservation check found.
type Drift struct {
	Stock  int64 `json:"stock"`  // the sum over items of stocked − stock − sold
	Credit int64 `json:"credit"` // the sum over users of funded − credit − charged
	Items  int   `json:"items"`  // items off balance
	Users  int   `json:"users"`  // users off balance
}

// scanCount is the check's SCAN COUNT and pipeline size.
const scanCount = 1000

// Conservation checks stocked = stock + sold for every item and funded =
// credit + charged for every user; the scripts keep both at any instant,
// so a drift means a change outside the flow. It SCANs every master.
func (s *Flow) Conservation(ctx context.Context) (Drift, error) {
	var d Drift
	var mu sync.Mutex
	for _, kind := range []struct {
		noun, field, prov, sales string
		sum                      *int64
		n                        *int
	}{{"item", "stock", "stocked", "sold", &d.Stock, &d.Items}, {"user", "credit", "funded", "charged", &d.Credit, &d.Users}} {
		err := scanEach(ctx, s.rdb, s.keys.pattern(kind.noun), func(ctx context.Context, c redis.Cmdable, keys []string) error {
			pipe := c.Pipeline()
			cmds := make([]*redis.SliceCmd, len(keys))
			for i, k := range keys {
				cmds[i] = pipe.HMGet(ctx, k, kind.field, kind.prov, kind.sales)
			}
			if _, err := pipe.Exec(ctx); err != nil {
				return err
			}
			mu.Lock() // masters are scanned concurrently
			defer mu.Unlock()
			for _, c := range cmds {
				v := c.Val()
				if len(v) != 3 || v[0] == nil || v[1] == nil {
					continue // gone, or not counted yet
				}
				if diff := intOf(v[1]) - intOf(v[0]) - intOf(v[2]); diff != 0 { // provided − amount − sales
					*kind.sum += diff
					*kind.n++
				}
			}
			return nil
		})
		if err != nil {
			return Drift{}, fmt.Errorf("checkout: conservation of %ss: %w", kind.noun, err)
		}
	}
	return d, nil
}

func intOf(v any) int64 {
	s, _ := v.(string)
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// pattern matches the hashes of every item or user of every partition.
func (k Keys) pattern(noun string) string {
	return rediskey.Key(rediskey.Tag(Name+".*"), "co", noun, "*")
}

// scanEach hands fn each page of keys matching pat, on every master.
func scanEach(ctx context.Context, rdb redis.UniversalClient, pat string, fn func(context.Context, redis.Cmdable, []string) error) error {
	scan := func(ctx context.Context, c redis.Cmdable) error {
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, pat, scanCount).Result()
			if err != nil {
				return err
			}
			if len(keys) > 0 {
				if err := fn(ctx, c, keys); err != nil {
					return err
				}
			}
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	}
	return scan(ctx, rdb)
}

// conservationGauge exports the last check's drift.
type conservationGauge struct{ drift, drifting metric.Int64Gauge }

func newConservationGauge(mp metric.MeterProvider) (*conservationGauge, error) {
	m := mp.Meter(instrumentationScope)
	var g conservationGauge
	var err1, err2 error
	g.drift, err1 = m.Int64Gauge(MetricConservationDrift, metric.WithUnit("{unit}"),
		metric.WithDescription("Checkout conservation drift by kind (stock: stocked − stock − sold over items; credit: funded − credit − charged over users); 0 unless an amount changed outside the flow."))
	g.drifting, err2 = m.Int64Gauge(MetricConservationDrifting, metric.WithUnit("{entity}"),
		metric.WithDescription("Items (stock) or users (credit) whose conservation equation does not hold."))
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("checkout: conservation gauges: %w", err)
	}
	return &g, nil
}

// CheckConservation runs Conservation and exports it as gauges; a failed
// check keeps the last result.
func (s *Flow) CheckConservation(ctx context.Context) (Drift, error) {
	start := time.Now()
	d, err := s.Conservation(ctx)
	if err != nil {
		return d, err
	}
	stock, credit := metric.WithAttributes(keyKind.String(KindStock)), metric.WithAttributes(keyKind.String(KindCredit))
	s.cons.drift.Record(ctx, d.Stock, stock)
	s.cons.drift.Record(ctx, d.Credit, credit)
	s.cons.drifting.Record(ctx, int64(d.Items), stock)
	s.cons.drifting.Record(ctx, int64(d.Users), credit)
	if d != (Drift{}) {
		s.log.ErrorContext(ctx, "checkout: stock or credit not conserved", "stock_drift", d.Stock, "items", d.Items,
			"credit_drift", d.Credit, "users", d.Users, "took", time.Since(start))
	}
	return d, nil
}
