package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/flows/checkout"
	"github.com/dropstream/dropstream/flows/checkout/httpapi"
	"github.com/dropstream/dropstream/stream"
)

func init() { registerFlow(buildCheckout) }

// checkoutSweeper names the service that drives checkout attempts left
// open (a message dead-lettered, a checkout process gone) to a final
// status; one copy per deployment is enough, more are harmless.
const checkoutSweeper = "checkout-sweeper"

// checkoutVariables are the environment variables of the checkout flow,
// each a duration setting a field of checkout.Config (unset: its default).
var checkoutVariables = []struct {
	name  string
	field func(*checkout.Config) *time.Duration
}{
	{"DROPSTREAM_CHECKOUT_TIMEOUT", func(c *checkout.Config) *time.Duration { return &c.Timeout }},
	{"DROPSTREAM_CHECKOUT_SWEEP_INTERVAL", func(c *checkout.Config) *time.Duration { return &c.SweepInterval }},
	{"DROPSTREAM_CHECKOUT_SWEEP_AGE", func(c *checkout.Config) *time.Duration { return &c.SweepAge }},
	{"DROPSTREAM_CHECKOUT_ABANDON_AGE", func(c *checkout.Config) *time.Duration { return &c.AbandonAge }},
}

// checkoutConfig is the flow's configuration: the app's partitions and
// the durations of checkoutVariables.
func checkoutConfig(partitions int) (checkout.Config, error) {
	cfg := checkout.Config{Partitions: partitions}
	for _, v := range checkoutVariables {
		s, ok := os.LookupEnv(v.name)
		if !ok || s == "" {
			continue
		}
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return cfg, fmt.Errorf("%s=%q: want a positive duration", v.name, s)
		}
		*v.field(&cfg) = d
	}
	return cfg, nil
}

// buildCheckout wires the checkout saga (seed 004): the stock, payment and
// order stages, the analytics stage when ClickHouse is configured (else its
// group keeps the saga records), the sweeper service, the
// order/stock/payment contract on the API server, and the waiter that
// wakes checkout calls, which runs for the life of the app.
func buildCheckout(ctx context.Context, a *app) (*flow, error) {
	cfg, err := checkoutConfig(a.cfg.Partitions)
	if err != nil {
		return nil, fmt.Errorf("checkout: %w", err)
	}
	svc, err := checkout.NewService(a.rdb, a.pub, cfg, a.tel)
	if err != nil {
		return nil, fmt.Errorf("checkout: %w", err)
	}
	stages := svc.Stages()
	if a.ch != nil {
		stages = append(stages, svc.AnalyticsStage(a.ch))
	} else if err := stream.EnsureGroups(ctx, a.rdb, svc.Topics().Sagas, checkout.StageAnalytics); err != nil {
		return nil, fmt.Errorf("checkout: %w", err)
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := svc.Run(wctx); err != nil {
			a.log.Error("checkout: waiter stopped", "error", err)
		}
	}()
	return &flow{
		name:     "checkout",
		stages:   stages,
		services: map[string]func(context.Context) error{checkoutSweeper: svc.RunSweeper},
		routes:   func(srv *api.Server) { httpapi.Routes{Service: svc}.Register(srv) },
		demo: func(ctx context.Context) error {
			// Ten items, users and orders for the demo, created once.
			_, _, err := svc.Store().FindItem(ctx, "0")
			if !errors.Is(err, checkout.ErrNotFound) {
				return err
			}
			st := svc.Store()
			return errors.Join(st.BatchInitItems(ctx, 10, 100, 10), st.BatchInitUsers(ctx, 10, 1000), st.BatchInitOrders(ctx, 10, 10, 10, 10))
		},
		close: func() { cancel(); <-done },
	}, nil
}
