package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/term"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/internal/tick"
	"github.com/dropstream/dropstream/stream"
)

// embeddedMaxTTL bounds how long the demo's embedded Redis keeps records
// that expire: longer than its trim age and every claim timeout, so a
// redelivered message still finds its ledger entry.
const embeddedMaxTTL = 30 * time.Minute

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg Config
	var venues int
	var tick, interval, every time.Duration
	var churn, flap float64
	fs := flagSet("demo", "Runs everything in one process: an embedded Redis (unless DROPSTREAM_REDIS_URL is set),\n"+
		"a simulated reservation provider, every flow's stages and demo data, a log watcher and the API,\nwith a live status line.", stderr, &cfg, "text")
	envInt(fs, &venues, "venues", "DROPSTREAM_DEMO_VENUES", 6, "simulated venues")
	fs.DurationVar(&tick, "tick", 2*time.Second, "how often the simulated world changes")
	fs.DurationVar(&interval, "interval", 2*time.Second, "poll interval of the simulated source")
	fs.Float64Var(&churn, "churn", 0.05, "fraction of slots that flip per tick")
	fs.Float64Var(&flap, "flap", 0.02, "fraction of slots that toggle every tick")
	fs.DurationVar(&every, "status-every", time.Second, "how often the status line is refreshed (on a terminal)")
	var verbose bool
	fs.BoolVar(&verbose, "verbose", false, "show the logs from level info (same as --log-level info); by default the demo logs warnings and errors only, so the status line stays readable")
	// Warn unless DROPSTREAM_LOG_LEVEL sets a level: info logs, several a
	// second, would scroll the status line away.
	if _, set := os.LookupEnv("DROPSTREAM_LOG_LEVEL"); !set {
		cfg.LogLevel = "warn"
		fs.Lookup("log-level").DefValue = "warn"
	}
	if err := fs.parse(args); err != nil {
		return err
	}
	if verbose {
		cfg.LogLevel = "info"
	}
	if venues < 1 || venues > 100 || tick <= 0 || interval < time.Second || every <= 0 {
		return fmt.Errorf("venues %d (1..100), tick %s, interval %s (≥1s) or status-every %s out of range", venues, tick, interval, every)
	}
	overrides := map[string]string{"DROPSTREAM_DEMO_VENUES": strconv.Itoa(venues), "DROPSTREAM_DEMO_TICK": tick.String(),
		"DROPSTREAM_DEMO_INTERVAL": interval.String(), "DROPSTREAM_DEMO_CHURN": strconv.FormatFloat(churn, 'g', -1, 64),
		"DROPSTREAM_DEMO_FLAP": strconv.FormatFloat(flap, 'g', -1, 64)}
	cfg.Role = "demo"
	cfg.Instance = cmp.Or(cfg.Instance, "demo") // a restarted demo resumes its own pending messages
	a, err := newAppWith(ctx, cfg, overrides, stderr)
	if err != nil {
		return err
	}
	defer a.close()
	if _, err := a.stages(); err != nil {
		return err
	}
	var srv *api.Server
	if cfg.APIAddr != "" {
		// Built before anything starts: a route that cannot be registered
		// stops the demo at once.
		if srv, err = a.apiServer(); err != nil {
			return err
		}
		redirectRootToConsole(srv)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	// Cancelled before wg.Wait (defers run last first): a part that fails
	// stops the others, and the demo exits with its error.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A demo left running keeps the embedded Redis bounded: records kept
	// for days and checkout entities live at most embeddedMaxTTL, and the
	// heap holding them is collected at twice its live size.
	if a.embedded != nil {
		wg.Go(func() { a.embedded.BoundTTLs(ctx, embeddedMaxTTL, 30*time.Second) })
		wg.Go(func() { a.boundDemoEntities(ctx, embeddedMaxTTL, 30*time.Second) })
		if _, set := os.LookupEnv("GOGC"); !set {
			debug.SetGCPercent(100)
		}
	}
	runners, failed, err := a.startDemo(ctx, &wg)
	if err != nil {
		return err
	}
	if srv != nil {
		a.serve(ctx, &wg, srv, failed)
		fmt.Fprintf(stdout, "dropstream demo: console on %s\n", consoleURL(cfg.APIAddr))
		fmt.Fprintf(stdout, "dropstream demo: API on %s — try /v1/availability?state=open, /v1/sources, /v1/watchers, /metrics, /openapi.json; Ctrl-C stops\n", cfg.APIAddr)
	}
	if a.embedded != nil {
		// On the demo's own output only, for redis-cli: the password is new
		// at each start and dies with the process; the logs show the
		// address alone.
		fmt.Fprintf(stdout, "dropstream demo: embedded Redis at %s (redis-cli -u %s)\n", a.embedded.Addr(), a.embedded.URL())
	}
	wg.Go(func() { a.status(ctx, stdout, runners, every) })
	select {
	case <-ctx.Done():
		return nil
	case err := <-failed:
		return err
	}
}

// status keeps a live status line of the process's metrics on a terminal;
// on anything else it prints nothing.
func (a *app) status(ctx context.Context, w io.Writer, runners []*stream.Runner, every time.Duration) {
	if f, ok := w.(*os.File); !ok || !term.IsTerminal(int(f.Fd())) {
		return
	}
	tick.EveryAfter(ctx, every, func() {
		var lag int64
		for _, r := range runners {
			lag += max(0, r.Lag())
		}
		fmt.Fprintf(w, "\r\033[K%s", statusLine(a.metricTotals(), lag))
	})
	fmt.Fprintln(w)
}

// statusLine is the demo's status line; the README explains each field.
func statusLine(m map[string]float64, lag int64) string {
	return fmt.Sprintf("runs %d | observations %d | transitions %d | notifications %d | lag %d | dlq %d",
		int64(m["dropstream_diff_runs_total"]), int64(m["dropstream_diff_observations_total"]),
		int64(m["dropstream_diff_transitions_total"]), int64(m[`dropstream_notifier_notifications_total{outcome="sent"}`]),
		lag, int64(m["dropstream_dlq_length"]))
}

// metricTotals sums the process's metrics by name, and by name and outcome
// or cache.
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
				if l.GetName() == "outcome" || l.GetName() == "cache" {
					out[f.GetName()+"{"+l.GetName()+"="+strconv.Quote(l.GetValue())+"}"] += v
				}
			}
		}
	}
	return out
}

// demoEntityPatterns match the checkout entities created through the API
// (items, users, orders). A store keeps them with no TTL; in the demo they
// would pile up with every checkout a user tries.
var demoEntityPatterns = []string{"*:co:item:*", "*:co:user:*", "*:co:order:*"}

// expireDemoEntities gives ttl to every key matched by demoEntityPatterns
// that has none, but the seeded ones (ids of digits only, as BatchInit and
// the demo's seed make them: a store's API ids are hex). On the embedded
// Redis only: KEYS walks the whole keyspace.
func expireDemoEntities(ctx context.Context, rdb redis.UniversalClient, ttl time.Duration) error {
	var keys []string
	for _, pat := range demoEntityPatterns {
		ks, err := rdb.Keys(ctx, pat).Result()
		if err != nil {
			return fmt.Errorf("demo entities %s: %w", pat, err)
		}
		for _, k := range ks {
			if id := k[strings.LastIndexByte(k, ':')+1:]; id == "" || strings.Trim(id, "0123456789") != "" {
				keys = append(keys, k)
			}
		}
	}
	if len(keys) == 0 {
		return nil
	}
	// EXPIRE … NX sets a TTL only where there is none.
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.ExpireNX(ctx, k, ttl)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("demo entities: expire: %w", err)
	}
	return nil
}

// boundDemoEntities runs expireDemoEntities every period until ctx ends;
// a failed round is logged and retried at the next.
func (a *app) boundDemoEntities(ctx context.Context, ttl, period time.Duration) {
	tick.Every(ctx, period, func() {
		if err := expireDemoEntities(ctx, a.rdb, ttl); err != nil && ctx.Err() == nil {
			a.log.Warn("demo: bounding checkout entities failed", "error", err)
		}
	})
}
