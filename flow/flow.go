// Package flow is the contract every flow of dropstream implements: the
// availability pipeline, the notifier, the checkout saga, the comic, feed
// and sell-offer flows and the sample flow alike.
//
// A Definition builds a flow over Deps; its Description declares the
// stages, services, edges, ClickHouse history and demo set-up, from which
// the app does the generic start-up and the console draws the graph. See
// docs/adding-a-flow.md.
package flow

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/internal/tenancy"
	"github.com/dropstream/dropstream/stream"
)

// Flow is what a flow's builder returns: its main type. Describe is called
// once, after the build; Close is called once when the app stops, after
// every stage, service and waiter of the app has returned.
type Flow interface {
	Describe() Description
	Close() error
}

// Description is what a flow declares.
type Description struct {
	// Stages are the flow's stream stages (its ClickHouse appends are in
	// History). `run --stages` selects them by name; the demo runs them all.
	Stages []stream.Stage
	// Services are loops beside the stages (pollers, sweepers, schedulers),
	// selectable with `run --stages` like stages.
	Services []Service
	// Waiters serve the flow's own calls (a checkout waiting for its saga)
	// in every process that serves the API, whatever `--stages` selects.
	Waiters []Service
	// Edges are the topics the flow's stages, services and routes publish
	// to.
	Edges []Edge
	// History are the flow's ClickHouse appends, or none.
	History []History
	// Demo prepares the flow's demo data once its stages run. It must be
	// idempotent: the demo may run against a persistent Redis. Nil: none.
	Demo func(ctx context.Context) error
	// Events returns up to limit of the flow's recent events that v sees,
	// newest first: a tenant sees its own and shared ones, among the newest
	// ScanFor(v, limit). Nil: none.
	Events func(ctx context.Context, v tenancy.View, limit int) ([]Event, error)
}

// Service is a named loop. Run returns nil when ctx ends; an error stops
// the process.
type Service struct {
	Name string
	Run  func(ctx context.Context) error
}

// Edge says that From publishes to Topic. From is the name of a stage or
// service of the flow, or "api" for its routes.
type Edge struct {
	From  string
	Topic stream.Topic
}

// FromAPI is the Edge.From of messages published by a flow's routes.
const FromAPI = "api"

// History is one batched ClickHouse append path of a flow.
type History struct {
	// Tables are the ClickHouse tables the stages append to.
	Tables []string
	// Groups are the topics and groups its stages read; without ClickHouse
	// they are created and their backlog waits.
	Groups []Group
	// Open builds the stages, which read exactly Groups; close, if not nil,
	// runs after they have returned.
	Open func(ctx context.Context, ch *clickhouse.Client) (stages []stream.Stage, close func() error, err error)
}

// Group is a consumer group of a topic.
type Group struct {
	Topic stream.Topic
	Name  string
}

// Deps are what the app gives every flow's builder.
type Deps struct {
	Redis     redis.UniversalClient
	Publisher *stream.Publisher
	// ClickHouse is nil when no DSN is configured; appends go through
	// History, reads may use it.
	ClickHouse *clickhouse.Client
	// Telemetry carries the providers and the logger of the app.
	Telemetry stream.Telemetry
	// Settings are the configuration, read once by the app.
	Settings Settings
	// Flows are the flows built before this one (Definitions are built in
	// their order).
	Flows Lookup
}

// Lookup finds a built flow by name.
type Lookup func(name string) (Flow, bool)

// Find returns the flow named name, built before the caller, as a T.
func Find[T Flow](l Lookup, name string) (T, error) {
	var zero T
	if l == nil {
		return zero, fmt.Errorf("flow %q: %w", name, ErrNotBuilt)
	}
	f, ok := l(name)
	if !ok {
		return zero, fmt.Errorf("flow %q: %w", name, ErrNotBuilt)
	}
	t, ok := f.(T)
	if !ok {
		return zero, fmt.Errorf("flow %q is a %T, not a %T", name, f, zero)
	}
	return t, nil
}

// ErrNotBuilt is returned (wrapped) by Find for a flow that is not built
// before the caller: unknown, or registered after it.
var ErrNotBuilt = errors.New("not built before this flow")

// Validate checks a description against its flow's name: stage and service
// names unique and prefixed "<name>-", every stage and history group
// valid, every edge from a known stage, service or the API.
func (d Description) Validate(name string) error {
	var errs []error
	seen := map[string]bool{FromAPI: true}
	add := func(kind, n string) {
		switch {
		case n == "":
			errs = append(errs, fmt.Errorf("flow %s: a %s has no name", name, kind))
		case seen[n]:
			errs = append(errs, fmt.Errorf("flow %s: %s %q named twice", name, kind, n))
		case !strings.HasPrefix(n, name+"-"):
			errs = append(errs, fmt.Errorf("flow %s: %s %q: want the prefix %q", name, kind, n, name+"-"))
		}
		seen[n] = true
	}
	for _, s := range d.Stages {
		add("stage", s.Name)
		if err := s.Topic.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("flow %s: stage %s: %w", name, s.Name, err))
		}
	}
	for _, s := range d.Services {
		add("service", s.Name)
		if s.Run == nil {
			errs = append(errs, fmt.Errorf("flow %s: service %s has no Run", name, s.Name))
		}
	}
	for _, w := range d.Waiters {
		if w.Run == nil || w.Name == "" {
			errs = append(errs, fmt.Errorf("flow %s: waiter %q has no name or no Run", name, w.Name))
		}
	}
	for _, h := range d.History {
		if h.Open == nil || len(h.Groups) == 0 {
			errs = append(errs, fmt.Errorf("flow %s: history %v needs Open and Groups", name, h.Tables))
		}
		for _, g := range h.Groups {
			add("history stage", g.Name)
			if err := g.Topic.Validate(); err != nil {
				errs = append(errs, fmt.Errorf("flow %s: history stage %s: %w", name, g.Name, err))
			}
		}
	}
	for _, e := range d.Edges {
		if !seen[e.From] {
			errs = append(errs, fmt.Errorf("flow %s: edge to %s from %q, which is no stage, service or %q of the flow", name, e.Topic, e.From, FromAPI))
		}
		if err := e.Topic.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("flow %s: edge from %s: %w", name, e.From, err))
		}
	}
	return errors.Join(errs...)
}
