package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/flows/checkout"
	"github.com/dropstream/dropstream/flows/checkout/httpapi"
	"github.com/dropstream/dropstream/stream"
)

// checkoutSweeper names the service that drives checkout attempts left
// open (a message dead-lettered, a checkout process gone) to a final
// status; one copy per deployment is enough, more are harmless.
const checkoutSweeper = "checkout-sweeper"

// checkoutVars are the variables of the checkout flow, each a duration
// setting a field of checkout.Config (unset: its default).
var checkoutVars = []flow.Var{
	{Name: "DROPSTREAM_CHECKOUT_TIMEOUT", Kind: flow.Duration, Usage: "checkout flow: how long a checkout call waits for its saga before giving the attempt up (compensated, 400) (default 30s)"},
	{Name: "DROPSTREAM_CHECKOUT_SWEEP_INTERVAL", Kind: flow.Duration, Usage: "checkout flow: how often the checkout-sweeper service looks for attempts left open (default 10s)"},
	{Name: "DROPSTREAM_CHECKOUT_SWEEP_AGE", Kind: flow.Duration, Usage: "checkout flow: age of an open attempt whose missing commands the sweeper sends again (default 30s)"},
	{Name: "DROPSTREAM_CHECKOUT_ABANDON_AGE", Kind: flow.Duration, Usage: "checkout flow: age of a pending attempt whose silent parts the sweeper gives up and compensates (default 5m)"},
}

// checkoutConfig is the flow's configuration from the settings.
func checkoutConfig(s flow.Settings) checkout.Config {
	return checkout.Config{Partitions: s.Partitions, Timeout: s.Duration("DROPSTREAM_CHECKOUT_TIMEOUT"),
		SweepInterval: s.Duration("DROPSTREAM_CHECKOUT_SWEEP_INTERVAL"), SweepAge: s.Duration("DROPSTREAM_CHECKOUT_SWEEP_AGE"),
		AbandonAge: s.Duration("DROPSTREAM_CHECKOUT_ABANDON_AGE")}
}

// buildCheckout wires the checkout saga (seed 004): the stock, payment and
// order stages, the analytics stage when ClickHouse is configured (else its
// group keeps the saga records), the sweeper service, the
// order/stock/payment contract on the API server, and the waiter that
// wakes checkout calls, which runs for the life of the app.
func buildCheckout(ctx context.Context, a *app) (*cmdFlow, error) {
	svc, err := checkout.NewService(a.rdb, a.pub, checkoutConfig(a.settings), a.tel)
	if err != nil {
		return nil, fmt.Errorf("checkout: %w", err)
	}
	return &cmdFlow{desc: flow.Description{
		Stages:   svc.Stages(),
		Services: []flow.Service{{Name: checkoutSweeper, Run: svc.RunSweeper}},
		Waiters:  []flow.Service{{Name: "checkout-waiter", Run: svc.Run}},
		History: []flow.History{{Tables: []string{"checkout_sagas"}, Groups: []flow.Group{{Topic: svc.Topics().Sagas, Name: checkout.StageAnalytics}},
			Open: func(_ context.Context, ch *clickhouse.Client) ([]stream.Stage, func() error, error) {
				return []stream.Stage{svc.AnalyticsStage(ch)}, nil, nil
			}}},
		Demo: func(ctx context.Context) error {
			// Ten items, users and orders for the demo, created once.
			_, _, err := svc.Store().FindItem(ctx, "0")
			if !errors.Is(err, checkout.ErrNotFound) {
				return err
			}
			st := svc.Store()
			return errors.Join(st.BatchInitItems(ctx, 10, 100, 10), st.BatchInitUsers(ctx, 10, 1000), st.BatchInitOrders(ctx, 10, 10, 10, 10))
		}},
		routes: func(srv *api.Server) { httpapi.Routes{Service: svc}.Register(srv) },
	}, nil
}
