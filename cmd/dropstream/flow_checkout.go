package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/flows/checkout"
	"github.com/dropstream/dropstream/flows/checkout/httpapi"
	"github.com/dropstream/dropstream/stream"
)

func init() { registerFlow(buildCheckout) }

// buildCheckout wires the checkout saga (seed 004): the stock, payment and
// order stages, the analytics stage when ClickHouse is configured (else its
// group keeps the saga records), the order/stock/payment contract on the
// API server, and the waiter that wakes checkout calls, which runs for the
// life of the app.
func buildCheckout(ctx context.Context, a *app) (*flow, error) {
	svc, err := checkout.NewService(a.rdb, a.pub, checkout.Config{Partitions: a.cfg.Partitions}, a.tel)
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
		name:   "checkout",
		stages: stages,
		routes: func(srv *api.Server) { httpapi.Routes{Service: svc}.Register(srv) },
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
