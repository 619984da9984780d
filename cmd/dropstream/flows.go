package main

import (
	"context"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/flows/availability"
	availhttp "github.com/dropstream/dropstream/flows/availability/httpapi"
	"github.com/dropstream/dropstream/flows/checkout"
	"github.com/dropstream/dropstream/flows/checkout/checkoutbench"
	checkouthttp "github.com/dropstream/dropstream/flows/checkout/httpapi"
	"github.com/dropstream/dropstream/flows/comic"
	"github.com/dropstream/dropstream/flows/comic/comicbench"
	comichttp "github.com/dropstream/dropstream/flows/comic/httpapi"
	"github.com/dropstream/dropstream/flows/feed"
	feedhttp "github.com/dropstream/dropstream/flows/feed/httpapi"
	"github.com/dropstream/dropstream/flows/offer"
	offerhttp "github.com/dropstream/dropstream/flows/offer/httpapi"
	"github.com/dropstream/dropstream/flows/offer/offerbench"
	"github.com/dropstream/dropstream/flows/sample"
)

// definitions are the flows of the binary, a line each, built in this
// order: a flow may find the flows above it (flow.Find).
func (a *app) definitions() []flow.Definition {
	return []flow.Definition{
		flow.Define(sample.Name, sample.New, nil),
		a.wired("notifier", buildNotifier).WithVars(notifierVars...),
		flow.Define(availability.Name, availability.New, availhttp.Register).WithVars(availability.Vars...),
		flow.Define(checkout.Name, checkout.New, checkouthttp.Register).WithVars(checkout.Vars...).WithBench(checkoutbench.Bench),
		flow.Define(comic.Name, comic.New, comichttp.Register).WithVars(comic.Vars...).WithBench(comicbench.Bench),
		flow.Define(offer.Name, offer.New, offerhttp.Register).WithBench(offerbench.Bench),
		flow.Define(feed.Name, feed.New, feedhttp.Register),
	}
}

// cmdFlow is a flow still wired in this package.
type cmdFlow struct {
	desc   flow.Description
	routes func(srv *api.Server)
	close  func()
}

func (f *cmdFlow) Describe() flow.Description { return f.desc }

func (f *cmdFlow) Close() error {
	if f.close != nil {
		f.close()
	}
	return nil
}

// wired defines a flow built by a builder of this package.
func (a *app) wired(name string, build func(ctx context.Context, a *app) (*cmdFlow, error)) flow.Definition {
	return flow.Define(name, func(ctx context.Context, _ flow.Deps) (*cmdFlow, error) { return build(ctx, a) },
		func(srv *api.Server, f *cmdFlow) {
			if f.routes != nil {
				f.routes(srv)
			}
		})
}
