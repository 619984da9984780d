package checkout_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

func TestAnalytics_finishedAttemptsReachClickHouse(t *testing.T) {
	ch, err := clickhouse.Open(t.Context(), clickhouse.Config{DSN: testenv.ClickHouseDSN(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if _, err := clickhouse.Migrate(t.Context(), ch, nil); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, testenv.RedisURL(t), envOptions{timeout: 20 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	r, err := stream.NewRunner(e.rdb, e.svc.AnalyticsStage(ch), stream.Telemetry{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() { _ = r.Run(ctx) })

	item := str(t, e.must(t, 200, "POST", "/stock/item/create/2"), "item_id")
	e.must(t, 200, "POST", "/stock/add/"+item+"/1")
	user := str(t, e.must(t, 200, "POST", "/payment/create_user"), "user_id")
	e.must(t, 200, "POST", "/payment/add_funds/"+user+"/10")
	var orders []string
	for range 2 {
		o := str(t, e.must(t, 200, "POST", "/orders/create/"+user), "order_id")
		e.must(t, 200, "POST", "/orders/addItem/"+o+"/"+item)
		orders = append(orders, o)
	}
	e.must(t, 200, "POST", "/orders/checkout/"+orders[0])
	e.must(t, 400, "POST", "/orders/checkout/"+orders[1]) // no stock left: payment compensated
	var s clickhouse.CheckoutStats
	testenv.WaitFor(t, 20*time.Second, func() bool {
		s, err = clickhouse.CheckoutSagaStats(context.Background(), ch)
		return err == nil && s.Attempts == 2
	}, "two attempts in ClickHouse")
	if s.Succeeded != 1 || s.Failed != 1 || s.Compensated != 1 || s.Reasons["insufficient stock for item "+item] != 1 {
		t.Errorf("stats = %+v", s)
	}
}
