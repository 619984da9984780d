package main

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/console"
	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/otel/spanbuffer"
)

// keptTraces is how many recent traces the process keeps for the console.
const keptTraces = 200

// keepTraces registers the buffer of recent traces the console shows.
func (a *app) keepTraces() {
	a.traces = spanbuffer.New(spanbuffer.Config{Traces: keptTraces, Ignore: func(name string) bool {
		// The console's own polling would push the pipeline's traces out.
		return strings.Contains(name, " "+console.Path)
	}})
	a.otel.AddSpanProcessor(a.traces)
}

// registerConsole serves the console at /console, over every built flow.
func (a *app) registerConsole(srv *api.Server) error {
	flows := make([]console.Flow, 0, len(a.flows))
	for _, f := range a.flows {
		flows = append(flows, console.Flow{Name: f.def.Name, Desc: f.desc})
	}
	interval, err := consoleSampleInterval()
	if err != nil {
		return err
	}
	c, err := console.New(console.Config{Redis: a.rdb, Flows: flows, Metrics: a.otel.Registry(), Traces: a.traces,
		JaegerUIURL: a.cfg.JaegerUIURL, SampleInterval: interval})
	if err != nil {
		return err
	}
	c.Register(srv)
	a.console = c
	return nil
}

// consoleSampleInterval reads DROPSTREAM_CONSOLE_SAMPLE_INTERVAL, how
// often the console samples the stages for its charts (unset: 10s).
func consoleSampleInterval() (time.Duration, error) {
	s, ok := os.LookupEnv("DROPSTREAM_CONSOLE_SAMPLE_INTERVAL")
	if !ok {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < console.MinSampleInterval {
		return 0, fmt.Errorf("console: DROPSTREAM_CONSOLE_SAMPLE_INTERVAL=%q: want a duration of at least %s", s, console.MinSampleInterval)
	}
	return d, nil
}

// consoleURL is the console's address for an API listening on addr.
func consoleURL(addr string) string { return flow.PublicURLFor(addr) + console.Path }

// redirectRootToConsole sends / to the console (the demo's front door).
func redirectRootToConsole(srv *api.Server) {
	srv.App().Get("/", func(c *fiber.Ctx) error { return c.Redirect(console.Path, http.StatusFound) })
}
