package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/dropstream/dropstream/flow"
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
	a, err := newApp(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	defer a.close()
	if _, err := a.stages(); err != nil {
		return err
	}
	srv, err := a.apiServer()
	if err != nil {
		return err
	}
	doc, err := json.MarshalIndent(srv.OpenAPI(), "", "  ")
	if err != nil {
		return err
	}
	doc = append(doc, '\n')
	if out != "" {
		return os.WriteFile(out, doc, 0o644)
	}
	_, err = stdout.Write(doc)
	return err
}
