package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/flows/offer"
	"github.com/dropstream/dropstream/stream"
)

// demoOffers is how many sample offers the demo seeds.
const demoOffers = 60

// buildOffer wires the sell-offer flow (seed 002): one stage per handler
// (standard, auction, wholesale), the history stage into ClickHouse when it
// is configured (else its group keeps the history), the offer routes, and
// demo offers.
func buildOffer(ctx context.Context, a *app) (*cmdFlow, error) {
	svc, err := offer.New(ctx, a.rdb, offer.Config{Partitions: a.cfg.Partitions}, a.tel)
	if err != nil {
		return nil, fmt.Errorf("offer: %w", err)
	}
	return &cmdFlow{desc: flow.Description{
		Stages: svc.Stages(),
		History: []flow.History{{Tables: []string{"offer_requests"}, Groups: []flow.Group{{Topic: svc.Config().HistoryTopic(), Name: offer.StageHistory}},
			Open: func(_ context.Context, ch *clickhouse.Client) ([]stream.Stage, func() error, error) {
				return []stream.Stage{svc.HistoryStage(ch)}, nil, nil
			}}},
		Demo: func(ctx context.Context) error {
			// Sample offers over every handler, created once.
			if _, err := svc.Catalog().Get(ctx, "o0"); !errors.Is(err, offer.ErrNotFound) {
				return err
			}
			_, err := svc.Catalog().Put(ctx, offer.SampleOffers(1, demoOffers, 5, svc.Config().Handlers)...)
			return err
		}},
		routes: func(srv *api.Server) { api.OfferRoutes{Service: svc}.Register(srv) },
		close:  svc.Close,
	}, nil
}
