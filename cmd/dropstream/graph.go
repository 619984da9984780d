package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

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

// runGraph is `dropstream graph`: the flows' stages, services, topics and
// ClickHouse appends, as a Mermaid flowchart or JSON, drawn from what each
// flow declares.
func runGraph(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg Config
	var format string
	fs := flagSet("graph", "Prints the graph of every flow: the topics each stage, service and route publishes to\n"+
		"and the stages that read them, from the flows' own declarations.", stderr, &cfg, "json")
	fs.StringVar(&format, "format", "mermaid", "mermaid or json")
	if err := fs.parse(args); err != nil {
		return err
	}
	if format != "mermaid" && format != "json" {
		return fmt.Errorf("format %q: want mermaid or json", format)
	}
	cfg.APIAddr, cfg.LogLevel = "", "error"
	a, err := newApp(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	defer a.close()
	g, err := a.graph(ctx)
	if err != nil {
		return err
	}
	if format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(g)
	}
	_, err = io.WriteString(stdout, g.Mermaid())
	return err
}

// graph is the graph of the app's flows.
func (a *app) graph(ctx context.Context) (flow.Graph, error) {
	if err := a.buildFlows(ctx); err != nil {
		return flow.Graph{}, err
	}
	names := make([]string, len(a.flows))
	descs := make([]flow.Description, len(a.flows))
	for i, f := range a.flows {
		names[i], descs[i] = f.def.Name, f.desc
	}
	return flow.NewGraph(names, descs), nil
}

// runOpenAPI is `dropstream openapi`: the API's OpenAPI 3 document, the one
// the server answers at /openapi.json, built without listening or running
// a stage.
func runOpenAPI(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg Config
	var out string
	fs := flagSet("openapi", "Prints the OpenAPI 3 document the API serves at /openapi.json.", stderr, &cfg, "json")
	fs.StringVar(&out, "o", "", "write the document to this `file` instead of standard output")
	if err := fs.parse(args); err != nil {
		return err
	}
	cfg.LogLevel = "error"
	doc, err := openAPIDocument(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	if out != "" {
		return os.WriteFile(out, doc, 0o644)
	}
	_, err = stdout.Write(doc)
	return err
}

// openAPIDocument is the indented JSON of the document of the API that
// cfg configures, every flow's routes registered.
func openAPIDocument(ctx context.Context, cfg Config, stderr io.Writer) ([]byte, error) {
	a, err := newApp(ctx, cfg, stderr)
	if err != nil {
		return nil, err
	}
	defer a.close()
	if _, err := a.stages(); err != nil {
		return nil, err
	}
	srv, err := a.apiServer()
	if err != nil {
		return nil, err
	}
	doc, err := json.MarshalIndent(srv.OpenAPI(), "", "  ")
	if err != nil {
		return nil, err
	}
	return append(doc, '\n'), nil
}

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
