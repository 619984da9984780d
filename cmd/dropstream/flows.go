package main

import (
	"context"
	"fmt"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/stream"
)

// flow is one domain flow wired into the binary (checkout, offer, comic,
// feed, ...). Every field but name is optional.
type flow struct {
	// name identifies the flow in errors and logs.
	name string
	// stages are its stream stages; `run --stages` selects them by name and
	// the demo runs them all.
	stages []stream.Stage
	// services are loops that run beside the stages, by name (selectable
	// with `run --stages` like stages).
	services map[string]func(context.Context) error
	// routes registers its API operations.
	routes func(srv *api.Server)
	// demo prepares demo data once the stages run; it must be idempotent
	// (the demo may run against a persistent Redis).
	demo func(ctx context.Context) error
	// close releases what the builder opened; the app calls it on close.
	close func()
}

// flowBuilder builds one flow over the app's Redis, publisher, ClickHouse
// (a.ch, nil when not configured) and telemetry.
type flowBuilder func(ctx context.Context, a *app) (*flow, error)

// flowBuilders are the domain flows of the binary. Each flow_*.go file
// registers its builder here from an init function, so flows are added
// without touching the app's wiring.
var flowBuilders []flowBuilder

// registerFlow adds a flow builder; it is called from init functions.
func registerFlow(b flowBuilder) { flowBuilders = append(flowBuilders, b) }

// buildFlows builds every registered flow once.
func (a *app) buildFlows(ctx context.Context) error {
	if a.flowsBuilt {
		return nil
	}
	a.flowsBuilt = true
	for _, b := range flowBuilders {
		f, err := b(ctx, a)
		if err != nil {
			return fmt.Errorf("flow: %w", err)
		}
		if f.close != nil {
			a.closers = append(a.closers, f.close)
		}
		a.flows = append(a.flows, f)
	}
	return nil
}
