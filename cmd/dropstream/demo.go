package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/collector"
	"github.com/dropstream/dropstream/collector/simulator"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/stream"
)

// demoSource is the simulated source the demo polls.
const demoSource = "demo-sim"

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg Config
	var venues int
	var tick, interval, every time.Duration
	var churn, flap float64
	fs := flagSet("demo", "Runs everything in one process: an embedded Redis (unless DROPSTREAM_REDIS_URL is set),\n"+
		"a simulated reservation provider, the availability pipeline, a log watcher and the API,\nwith a live status line.", stderr, &cfg, "text")
	envInt(fs, &venues, "venues", "DROPSTREAM_DEMO_VENUES", 6, "simulated venues")
	fs.DurationVar(&tick, "tick", 2*time.Second, "how often the simulated world changes")
	fs.DurationVar(&interval, "interval", 2*time.Second, "poll interval of the simulated source")
	fs.Float64Var(&churn, "churn", 0.05, "fraction of slots that flip per tick")
	fs.Float64Var(&flap, "flap", 0.02, "fraction of slots that toggle every tick")
	fs.DurationVar(&every, "status-every", time.Second, "how often the status line is refreshed")
	if err := fs.parse(args); err != nil {
		return err
	}
	if venues < 1 || venues > 100 || tick <= 0 || interval < time.Second || every <= 0 {
		return fmt.Errorf("venues %d (1..100), tick %s, interval %s (≥1s) or status-every %s out of range", venues, tick, interval, every)
	}
	a, err := newApp(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	defer a.close()
	all, err := a.stages()
	if err != nil {
		return err
	}
	var stages []stream.Stage
	for _, s := range all {
		if s.Topic.Flow == avail.Flow {
			stages = append(stages, s)
		}
	}
	services := []string{collectorStage}
	for _, f := range a.flows {
		stages = append(stages, f.stages...)
		for n := range f.services {
			services = append(services, n)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sim, err := simulator.New(simulator.Config{Seed: 1, Venues: venues, Churn: churn, Flap: flap, AutoTick: tick})
	if err != nil {
		return err
	}
	simURL, err := sim.Start(ctx, "127.0.0.1:0")
	if err != nil {
		return err
	}
	if err := a.demoSetup(ctx, sim, simURL, interval); err != nil {
		return err
	}
	if err := a.av.keepBacklogs(ctx, a); err != nil {
		return err
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	runners, failed, err := a.runStages(ctx, &wg, stages, 1)
	if err != nil {
		return err
	}
	a.runServices(ctx, &wg, services, failed)
	// A demo left running keeps the embedded Redis bounded: acknowledged
	// entries older than ten minutes are trimmed, as `run` does after an hour.
	topics := make([]stream.Topic, 0, len(stages))
	for _, s := range stages {
		topics = append(topics, s.Topic)
	}
	trimmer := stream.NewTrimmer(a.rdb, stream.TrimConfig{MinAge: 10 * time.Minute}, a.log, topics...)
	wg.Go(func() { trimmer.Run(ctx) })
	// The flows' demo data is seeded beside the running API, so the API
	// answers at once (seeding on the embedded Redis takes seconds).
	for _, f := range a.flows {
		if f.demo != nil {
			wg.Go(func() {
				if err := f.demo(ctx); err != nil && ctx.Err() == nil {
					failed <- fmt.Errorf("demo of %s: %w", f.name, err)
				}
			})
		}
	}
	if cfg.APIAddr != "" {
		srv, err := a.apiServer()
		if err != nil {
			return err
		}
		wg.Go(func() {
			if err := srv.Listen(ctx); err != nil {
				failed <- fmt.Errorf("api: %w", err)
			}
		})
		fmt.Fprintf(stdout, "dropstream demo: simulator at %s, API on %s — try /v1/availability?state=open, /v1/sources, /v1/watchers, /metrics, /openapi.json; Ctrl-C stops\n", simURL, cfg.APIAddr)
	}
	wg.Go(func() { a.status(ctx, stdout, runners, every) })
	select {
	case <-ctx.Done():
		return nil
	case err := <-failed:
		return err
	}
}

// demoSetup registers the simulated source (every venue, date and party
// size) and a watcher that logs every stable opening.
func (a *app) demoSetup(ctx context.Context, sim *simulator.Simulator, url string, interval time.Duration) error {
	simCfg := sim.Config()
	src := collector.Source{ID: demoSource, Provider: "simulator", BaseURL: url, Interval: interval, Stabilization: 2, RateLimit: 100}
	for _, v := range sim.Venues() {
		for _, d := range simCfg.Dates {
			for _, p := range simCfg.PartySizes {
				src.Scopes = append(src.Scopes, avail.Scope{Venue: strconv.FormatInt(v.ID, 10), Date: d, PartySize: p})
			}
		}
	}
	if err := src.Validate(); err != nil {
		return fmt.Errorf("demo source: %w", err)
	}
	if err := a.av.sources.Put(ctx, src); err != nil {
		return err
	}
	if err := a.av.collector.Upsert(src); err != nil {
		return err
	}
	watchers, _, err := a.av.watchers.List(ctx, "", 1)
	if err != nil || len(watchers) > 0 {
		return err
	}
	_, err = a.av.watchers.Create(ctx, notifier.Watcher{Name: "demo: every simulated opening", Provider: "simulator", Channel: "log"})
	return err
}

// status prints a live status line: on a terminal it rewrites one line,
// otherwise it prints a line each period. The figures are the process's own
// metrics, as /metrics shows them.
func (a *app) status(ctx context.Context, w io.Writer, runners []*stream.Runner, every time.Duration) {
	tty := isTerminal(w)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if tty {
				fmt.Fprintln(w)
			}
			return
		case <-t.C:
		}
		m := a.metricTotals()
		var lag int64
		for _, r := range runners {
			lag += max(0, r.Lag())
		}
		line := fmt.Sprintf("runs %d | observations %d | transitions %d | notifications %d | lag %d | dlq %d",
			int64(m["dropstream_diff_runs_total"]), int64(m["dropstream_diff_observations_total"]),
			int64(m["dropstream_diff_transitions_total"]), int64(m[`dropstream_notifier_notifications_total{outcome="sent"}`]),
			lag, int64(m["dropstream_dlq_length"]))
		if tty {
			fmt.Fprintf(w, "\r\033[K%s", line)
		} else {
			fmt.Fprintln(w, line)
		}
	}
}

// metricTotals sums the process's metrics by name, and by name with an
// outcome label, from the Prometheus registry.
func (a *app) metricTotals() map[string]float64 {
	out := map[string]float64{}
	fams, err := a.otel.Registry().Gather()
	if err != nil {
		return out
	}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			out[f.GetName()] += v
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" {
					out[f.GetName()+"{outcome="+strconv.Quote(l.GetValue())+"}"] += v
				}
			}
		}
	}
	return out
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
