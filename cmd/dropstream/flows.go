package main

import (
	"github.com/dropstream/dropstream/flow"
	availflow "github.com/dropstream/dropstream/flows/avail"
	"github.com/dropstream/dropstream/flows/avail/availbench"
	availhttp "github.com/dropstream/dropstream/flows/avail/httpapi"
	"github.com/dropstream/dropstream/flows/checkout"
	"github.com/dropstream/dropstream/flows/checkout/checkoutbench"
	checkouthttp "github.com/dropstream/dropstream/flows/checkout/httpapi"
	"github.com/dropstream/dropstream/flows/comic"
	"github.com/dropstream/dropstream/flows/comic/comicbench"
	comichttp "github.com/dropstream/dropstream/flows/comic/httpapi"
	"github.com/dropstream/dropstream/flows/feed"
	"github.com/dropstream/dropstream/flows/feed/feedbench"
	feedhttp "github.com/dropstream/dropstream/flows/feed/httpapi"
	"github.com/dropstream/dropstream/flows/offer"
	offerhttp "github.com/dropstream/dropstream/flows/offer/httpapi"
	"github.com/dropstream/dropstream/flows/offer/offerbench"
	"github.com/dropstream/dropstream/flows/sample"
	"github.com/dropstream/dropstream/notifier"
	notifierhttp "github.com/dropstream/dropstream/notifier/httpapi"
	"github.com/dropstream/dropstream/notifier/notifierbench"
)

// definitions are the flows of the binary, a line each, built in this
// order: a flow may find the flows above it (flow.Find).
func definitions() []flow.Definition {
	return []flow.Definition{
		flow.Define(sample.Name, sample.New, nil),
		flow.Define(notifier.Name, notifier.New, notifierhttp.Register).WithVars(notifier.Vars...).WithBench(notifierbench.Bench),
		flow.Define(availflow.Name, availflow.New, availhttp.Register).WithVars(availflow.Vars...).WithBench(availbench.Bench),
		flow.Define(checkout.Name, checkout.New, checkouthttp.Register).WithVars(checkout.Vars...).WithBench(checkoutbench.Bench),
		flow.Define(comic.Name, comic.New, comichttp.Register).WithVars(comic.Vars...).WithBench(comicbench.Bench),
		flow.Define(offer.Name, offer.New, offerhttp.Register).WithVars(offer.Vars...).WithBench(offerbench.Bench),
		flow.Define(feed.Name, feed.New, feedhttp.Register).WithVars(feed.Vars...).WithBench(feedbench.Bench),
	}
}
