package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
)

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
