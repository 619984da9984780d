package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" // registers /debug/pprof/ on http.DefaultServeMux
	"os"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/console"
	"github.com/dropstream/dropstream/flow"
)

// keptTraces is how many recent traces the process keeps for the console.
const keptTraces = 200

// registerConsole serves the console at /console, over every built flow.
func (a *app) registerConsole(srv *api.Server) error {
	flows := make([]console.Flow, 0, len(a.flows))
	for _, f := range a.flows {
		flows = append(flows, console.Flow{Name: f.def.Name, Desc: f.desc})
	}
	// DROPSTREAM_CONSOLE_SAMPLE_INTERVAL is how often the console samples
	// the stages for its charts (unset: 10s).
	s, set := os.LookupEnv("DROPSTREAM_CONSOLE_SAMPLE_INTERVAL")
	interval, err := time.ParseDuration(s)
	if set && (err != nil || interval < console.MinSampleInterval) {
		return fmt.Errorf("console: DROPSTREAM_CONSOLE_SAMPLE_INTERVAL=%q: want a duration of at least %s", s, console.MinSampleInterval)
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

// consoleURL is the console's address for an API listening on addr.
func consoleURL(addr string) string { return flow.PublicURLFor(addr) + console.Path }

// redirectRootToConsole sends / to the console (the demo's front door).
func redirectRootToConsole(srv *api.Server) {
	srv.App().Get("/", func(c *fiber.Ctx) error { return c.Redirect(console.Path, http.StatusFound) })
}

// validatePprofAddr accepts an empty address or a host:port whose host is
// a loopback address or "localhost": profiles show the process's memory
// and are served without authentication, so never beyond the machine.
func validatePprofAddr(addr string) error {
	if addr == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("pprof address %q: want host:port", addr)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("pprof address %q: the host must be a loopback address (127.0.0.1, ::1 or localhost)", addr)
	}
	return nil
}

// servePprof serves net/http/pprof on addr, on a listener of its own (never
// the API's); stop closes it.
func servePprof(addr string, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("pprof: %w", err)
	}
	// net/http/pprof registers its handlers, and only them, on http.DefaultServeMux.
	srv := &http.Server{Handler: http.DefaultServeMux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("pprof server stopped", "err", err)
		}
	}()
	log.Info("pprof listening", "addr", ln.Addr().String())
	return func() { _ = srv.Close() }, nil
}
