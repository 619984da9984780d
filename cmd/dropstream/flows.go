package main

import (
	"context"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/flows/sample"
	"github.com/dropstream/dropstream/notifier"
	notifierhttp "github.com/dropstream/dropstream/notifier/httpapi"
	"github.com/dropstream/dropstream/notifier/notifierbench"
)

// definitions are the flows of the binary, a line each, built in this
// order: a flow may find the flows above it (flow.Find).
func (a *app) definitions() []flow.Definition {
	return []flow.Definition{
		flow.Define(sample.Name, sample.New, nil),
		flow.Define(notifier.Name, notifier.New, notifierhttp.Register).WithVars(notifier.Vars...).WithBench(notifierbench.Bench),
		a.wired("avail", buildAvailability).WithVars(availVars...),
		a.wired("checkout", buildCheckout).WithVars(checkoutVars...),
		a.wired("comic", buildComic).WithVars(comicVars...),
		a.wired("offer", buildOffer),
		a.wired("feed", buildFeedFlow),
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
