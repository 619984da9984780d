package checkout_test

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/dropstream/dropstream/flows/checkout"
	"github.com/dropstream/dropstream/stream"
)

// drift runs the conservation check over e's Redis.
func (e *env) drift(t *testing.T) checkout.Drift {
	t.Helper()
	d, err := e.svc.Conservation(context.Background())
	if err != nil {
		t.Fatalf("conservation: %v", err)
	}
	return d
}

// gauges reads the conservation gauges by kind: drift and drifting.
func gauges(t *testing.T, r *sdkmetric.ManualReader) map[string][2]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string][2]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			i := map[string]int{checkout.MetricConservationDrift: 0, checkout.MetricConservationDrifting: 1}
			j, ok := i[m.Name]
			g, isGauge := m.Data.(metricdata.Gauge[int64])
			if !ok || !isGauge {
				continue
			}
			for _, p := range g.DataPoints {
				kind, _ := p.Attributes.Value("kind")
				v := out[kind.AsString()]
				v[j] = p.Value
				out[kind.AsString()] = v
			}
		}
	}
	return out
}

func TestSaga_conservationDriftShowsStockOrCreditChangedWithoutASale(t *testing.T) {
	ctx := context.Background()
	for _, b := range contractBackends() {
		t.Run(b.name, func(t *testing.T) {
			e := newEnv(t, b.url(t), envOptions{timeout: 20 * time.Second})
			reader := sdkmetric.NewManualReader()
			tel := stream.Telemetry{Logger: quiet(), MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))}
			checker, err := checkout.NewWith(e.rdb, stream.NewPublisher(e.rdb, tel), checkout.Config{Partitions: partitions}, tel)
			if err != nil {
				t.Fatal(err)
			}
			defer checker.Close()
			if g := gauges(t, reader); len(g) != 0 {
				t.Errorf("gauges before the first check = %v, want none", g)
			}
			before, err := checker.CheckConservation(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// Sales, a failed checkout, stock and credit changed through
			// the API: all conserved.
			s := newShop(t, e, 10, 2)
			e.must(t, 200, "POST", "/orders/checkout/"+s.order)
			poor := newShop(t, e, 1, 2)
			e.must(t, 400, "POST", "/orders/checkout/"+poor.order)
			e.must(t, 200, "POST", "/stock/subtract/"+s.item+"/3")
			e.must(t, 200, "POST", "/payment/pay/"+s.user+"/1")
			s.expect(t, e, 5, 3, true)
			if d := e.drift(t); d != before {
				t.Fatalf("drift after sales = %+v, want %+v as before", d, before)
			}

			keys := e.svc.Store().Keys()
			tests := []struct {
				name   string
				change func() error
				undo   func() error
				want   checkout.Drift
			}{
				{"stock taken without a sale",
					func() error { return e.rdb.HIncrBy(ctx, keys.Item(s.item), "stock", -1).Err() },
					func() error { return e.rdb.HIncrBy(ctx, keys.Item(s.item), "stock", 1).Err() },
					checkout.Drift{Stock: before.Stock + 1, Items: before.Items + 1, Credit: before.Credit, Users: before.Users}},
				{"credit given twice",
					func() error { return e.rdb.HIncrBy(ctx, keys.User(s.user), "credit", 6).Err() },
					func() error { return e.rdb.HIncrBy(ctx, keys.User(s.user), "credit", -6).Err() },
					checkout.Drift{Stock: before.Stock, Items: before.Items, Credit: before.Credit - 6, Users: before.Users + 1}},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					if err := tc.change(); err != nil {
						t.Fatal(err)
					}
					d, err := checker.CheckConservation(ctx)
					if err != nil || d != tc.want {
						t.Errorf("check = %+v, %v; want %+v", d, err, tc.want)
					}
					g := gauges(t, reader)
					if g[checkout.KindStock] != [2]int64{tc.want.Stock, int64(tc.want.Items)} ||
						g[checkout.KindCredit] != [2]int64{tc.want.Credit, int64(tc.want.Users)} {
						t.Errorf("gauges = %v, want the check's %+v", g, tc.want)
					}
					if err := tc.undo(); err != nil {
						t.Fatal(err)
					}
					if d := e.drift(t); d != before {
						t.Errorf("drift once undone = %+v, want %+v", d, before)
					}
				})
			}
		})
	}
}
