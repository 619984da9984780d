package avail

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/collector"
	"github.com/dropstream/dropstream/collector/simulator"
	"github.com/dropstream/dropstream/flows/avail/watch"
)

// DemoSource is the id of the simulated source the demo polls.
const DemoSource = "demo-sim"

// demo starts a simulated provider, a source polling all of it and, when
// there is no watcher, one logging every stable opening.
func (f *Flow) demo(ctx context.Context) error {
	s := f.settings
	churn, err1 := strconv.ParseFloat(s.String(VarDemoChurn), 64)
	flap, err2 := strconv.ParseFloat(s.String(VarDemoFlap), 64)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("%s or %s: %w", VarDemoChurn, VarDemoFlap, err)
	}
	sim, err := simulator.New(simulator.Config{Seed: 1, Venues: s.Int(VarDemoVenues), Churn: churn, Flap: flap,
		AutoTick: s.Duration(VarDemoTick)})
	if err != nil {
		return err
	}
	url, err := sim.Start(ctx, "127.0.0.1:0")
	if err != nil {
		return err
	}
	f.log.Info("demo: simulated reservation provider started", "url", url)
	// The collector may reach this simulator, and no other loopback port.
	if err := f.egress.Permit(strings.TrimPrefix(url, "http://")); err != nil {
		return err
	}
	simCfg := sim.Config()
	src := collector.Source{ID: DemoSource, Provider: "simulator", BaseURL: url, Interval: s.Duration(VarDemoInterval),
		Stabilization: 2, RateLimit: 100}
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
	if err := f.putSource(ctx, src); err != nil {
		return err
	}
	watchers, _, err := f.watchers.List(ctx, "", 1)
	if err != nil || len(watchers) > 0 {
		return err
	}
	_, err = f.watchers.Create(ctx, watch.Watcher{Name: "demo: every simulated opening", Provider: "simulator", Channel: "log"})
	return err
}
