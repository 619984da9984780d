package checkout

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/dropstream/dropstream/internal/rediskey"
)

// Metric names of the flow (Prometheus names in parentheses).
const (
	// MetricConservationDrift is the last check's Drift by kind ("stock",
	// "credit"). Int64ObservableGauge.
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
	// Stock is the sum over items of stocked − stock − sold.
	Stock int64 `json:"stock"`
	// Credit is the sum over users of funded − credit − charged.
	Credit int64 `json:"credit"`
	// Items and Users count those off balance.
	Items int `json:"items"`
	Users int `json:"users"`
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
			var sum int64
			var n int
			for _, c := range cmds {
				v := c.Val()
				if len(v) != 3 || v[0] == nil || v[1] == nil {
					continue // gone, or not counted yet
				}
				amt, prov, sales := intOf(v[0]), intOf(v[1]), intOf(v[2])
				if diff := prov - amt - sales; diff != 0 {
					sum += diff
					n++
				}
			}
			mu.Lock()
			*kind.sum += sum
			*kind.n += n
			mu.Unlock()
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
type conservationGauge struct {
	last atomic.Pointer[Drift]
	reg  metric.Registration
}

func newConservationGauge(mp metric.MeterProvider) (*conservationGauge, error) {
	g := &conservationGauge{}
	m := mp.Meter(instrumentationScope)
	drift, err1 := m.Int64ObservableGauge(MetricConservationDrift, metric.WithUnit("{unit}"),
		metric.WithDescription("Checkout conservation drift by kind (stock: stocked − stock − sold over items; credit: funded − credit − charged over users); 0 unless an amount changed outside the flow."))
	drifting, err2 := m.Int64ObservableGauge(MetricConservationDrifting, metric.WithUnit("{entity}"),
		metric.WithDescription("Items (stock) or users (credit) whose conservation equation does not hold."))
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("checkout: conservation gauges: %v %v", err1, err2)
	}
	stock, credit := metric.WithAttributes(keyKind.String(KindStock)), metric.WithAttributes(keyKind.String(KindCredit))
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		d := g.last.Load()
		if d == nil {
			return nil
		}
		o.ObserveInt64(drift, d.Stock, stock)
		o.ObserveInt64(drift, d.Credit, credit)
		o.ObserveInt64(drifting, int64(d.Items), stock)
		o.ObserveInt64(drifting, int64(d.Users), credit)
		return nil
	}, drift, drifting)
	if err != nil {
		return nil, fmt.Errorf("checkout: conservation gauges: %w", err)
	}
	g.reg = reg
	return g, nil
}

// CheckConservation runs Conservation and exports it as gauges; a failed
// check keeps the last result.
func (s *Flow) CheckConservation(ctx context.Context) (Drift, error) {
	start := time.Now()
	d, err := s.Conservation(ctx)
	if err != nil {
		return d, err
	}
	s.cons.last.Store(&d)
	if d != (Drift{}) {
		s.log.ErrorContext(ctx, "checkout: stock or credit not conserved", "stock_drift", d.Stock, "items", d.Items,
			"credit_drift", d.Credit, "users", d.Users, "took", time.Since(start))
	}
	return d, nil
}
