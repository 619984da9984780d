package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/dropstream/dropstream/flow"
	availflow "github.com/dropstream/dropstream/flows/avail"
	"github.com/dropstream/dropstream/internal/benchstat"
	"github.com/dropstream/dropstream/internal/progress"
	"github.com/dropstream/dropstream/internal/settings"
)

// apiBenchConfig is what `bench api` measures.
type apiBenchConfig struct {
	// Connections are the load process's keep-alive connections. Default 64.
	Connections int `flag:"connections" default:"64" range:"1..4096" help:"keep-alive connections of the load process"`
	// Phase is the length of each route's two phases. Default 10s.
	Phase time.Duration `flag:"phase" default:"10s" range:"100ms..1h" help:"length of each route's saturation and fixed-rate phases"`
	// Rate is the fixed rate of the latency phase, requests/s. Default 2,000.
	Rate int `flag:"rate" default:"2000" range:"1..1000000" help:"requests/s of the fixed-rate phase"`
}

// apiRouteResult is one route's figures.
type apiRouteResult struct {
	Route         string
	Saturation    benchstat.LoadResult
	Fixed         benchstat.LoadResult
	CPUPerRequest benchstat.CPU
	// Hits and Listed are the list pages served again and listed at
	// saturation (writer.ListCache).
	Hits, Listed int64
}

// runBenchAPI is `bench api`: the binary's defaults serving the read
// routes apps call most and one write route, loaded over HTTP from a
// process of its own.
func runBenchAPI(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg Config
	fs := flagSet("bench api", "Serves the API as `demo` does (every stage and the demo data) and loads its most called read routes\n"+
		"and one write route from a separate process: requests/s at saturation, p50/p99 at a fixed rate, CPU per request.", stderr, &cfg, "json")
	var bc apiBenchConfig
	settings.BindFlags(fs.FlagSet, &bc)
	gauge := fs.Int("gauge-messages", 100_000, "messages of the plain go-redis gauge run before the bench (0: no gauge)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the server process to this file")
	if err := fs.parse(args); err != nil {
		return err
	}
	if err := settings.Check("bench api", &bc); err != nil {
		return err
	}
	fmt.Fprint(stdout, fs.benchSettings())
	stop, err := startCPUProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stop()
	_, err = benchAPI(ctx, cfg, bc, *gauge, stdout, stderr)
	return err
}

// benchAPI runs the bench and prints its table; it returns each route's
// figures.
func benchAPI(ctx context.Context, cfg Config, bc apiBenchConfig, gauge int, stdout, stderr io.Writer) ([]apiRouteResult, error) {
	cfg.Role, cfg.LogLevel = "bench", "warn"
	a, err := newAppWith(ctx, cfg, nil, stderr)
	if err != nil {
		return nil, err
	}
	defer a.close()
	phases := progress.New(stderr)
	env := flow.BenchEnv{Deps: a.deps(), Embedded: cfg.RedisURL == "", Stdout: stdout, Phases: phases}
	if err := benchGauge(ctx, env, gauge); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	base, err := serveForBench(ctx, a, &wg)
	if err != nil {
		return nil, err
	}
	routes, err := seedAPIBench(ctx, base, phases)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stdout, "bench api: %s; load from a separate process over %d keep-alive connections, %s a phase, fixed rate %d/s\n",
		benchRedisName(cfg), bc.Connections, bc.Phase, bc.Rate)
	var out []apiRouteResult
	for _, r := range routes {
		res := apiRouteResult{Route: r.method + " " + r.path}
		l := benchstat.Load{Method: r.method, URL: base + r.path, Connections: bc.Connections, Duration: bc.Phase}
		before, pages := benchstat.ReadCPU(ctx, a.rdb), a.metricTotals()
		ph := phases.Start(res.Route+": saturation", 0)
		if res.Saturation, err = l.RunBy(ctx, selfCommand); err != nil {
			return nil, err
		}
		res.CPUPerRequest = benchstat.ReadCPU(ctx, a.rdb).PerItem(before, res.Saturation.Requests)
		after := a.metricTotals()
		res.Hits = int64(after[listPagesHit] - pages[listPagesHit])
		res.Listed = int64(after[listPagesMiss] - pages[listPagesMiss])
		ph.Done(fmt.Sprintf("%.0f/s", res.Saturation.PerSecond()))
		ph = phases.Start(fmt.Sprintf("%s: %d/s", res.Route, bc.Rate), 0)
		l.Rate = bc.Rate
		if res.Fixed, err = l.RunBy(ctx, selfCommand); err != nil {
			return nil, err
		}
		ph.Done("p99 " + res.Fixed.P99.Round(10*time.Microsecond).String())
		out = append(out, res)
	}
	printAPIBench(stdout, bc, out)
	return out, nil
}

// serveForBench starts what `demo` does, and the API on a free loopback
// port, until ctx ends; it returns the API's base URL.
func serveForBench(ctx context.Context, a *app, wg *sync.WaitGroup) (string, error) {
	if _, _, err := a.startDemo(ctx, wg); err != nil {
		return "", err
	}
	srv, err := a.apiServer()
	if err != nil {
		return "", err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	wg.Go(func() { _ = srv.App().Listener(ln) })
	wg.Go(func() { <-ctx.Done(); _ = srv.App().Shutdown() })
	return "http://" + ln.Addr().String(), nil
}

// printAPIBench prints the table of results.
func printAPIBench(w io.Writer, bc apiBenchConfig, results []apiRouteResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "route\tsaturation req/s\tp50 at %d/s\tp99 at %d/s\tprocess µs/req\tRedis µs/req\tload µs/req\tanswers at saturation\t\n", bc.Rate, bc.Rate)
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%.0f\t%.2f ms\t%.2f ms\t%.1f\t%.1f\t%.1f\t%s\t\n", r.Route, r.Saturation.PerSecond(),
			float64(r.Fixed.P50)/1e6, float64(r.Fixed.P99)/1e6, benchstat.Micros(r.CPUPerRequest.Process), benchstat.Micros(r.CPUPerRequest.Redis),
			benchstat.Micros(r.Saturation.CPU)/float64(max(r.Saturation.Requests, 1)), r.Saturation.StatusLine())
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "process µs/req is the server process's CPU per request at saturation (its stages and the demo world's ticks included); load µs/req is the load process's own")
	for _, r := range results {
		if r.Hits+r.Listed > 0 {
			fmt.Fprintf(w, "%s: %d pages served again while unchanged, %d listed (%.1f %%) at saturation\n",
				r.Route, r.Hits, r.Listed, 100*float64(r.Listed)/float64(r.Hits+r.Listed))
		}
	}
}

// The list pages' counters in metricTotals.
const (
	listPagesHit  = `dropstream_writer_projection_list_pages_total{cache="hit"}`
	listPagesMiss = `dropstream_writer_projection_list_pages_total{cache="miss"}`
)

// apiRoute is one route the bench loads.
type apiRoute struct{ method, path string }

// seedAPIBench waits for the demo data the read routes need (an open
// slot, a notification of the demo's watcher), makes a checkout through
// the contract, and returns the routes to load.
func seedAPIBench(ctx context.Context, base string, phases *progress.Printer) ([]apiRoute, error) {
	c := benchClient{base: base, client: &http.Client{Timeout: 10 * time.Second}}
	ph := phases.Start("demo data: an open slot and a notification", 0)
	open, err := c.waitFor(ctx, "/v1/availability?state=open&limit=1", "items.0.venue")
	if err != nil {
		return nil, err
	}
	watcher, err := c.waitFor(ctx, "/v1/watchers?limit=1", "items.0.id")
	if err != nil {
		return nil, err
	}
	note, err := c.waitFor(ctx, "/v1/notifications?limit=1&subscriber="+watcher, "items.0.id")
	if err != nil {
		return nil, err
	}
	ph.Done("")
	ph = phases.Start("a checkout through the contract", 0)
	ids := map[string]string{}
	for _, step := range checkoutSteps {
		v, err := c.call(ctx, step.method, fillIDs(step.path, ids), step.keep)
		if err != nil {
			return nil, err
		}
		if step.keep != "" {
			ids[step.keep] = v
		}
	}
	ph.Done("")
	return []apiRoute{
		{http.MethodGet, "/v1/availability?state=open&limit=20&venue=" + open},
		{http.MethodGet, "/v1/sources/" + availflow.DemoSource},
		{http.MethodGet, "/v1/notifications/" + note + "/why"},
		{http.MethodGet, "/v1/sagas/" + ids["order_id"]},
		{http.MethodPost, "/stock/add/" + ids["item_id"] + "/1"},
	}, nil
}

// benchClient makes the bench's own calls to the API.
type benchClient struct {
	base   string
	client *http.Client
}

// call makes a request that must answer 2xx and returns the answer's
// field (a dotted path such as "items.0.id"; "" for none).
func (c benchClient) call(ctx context.Context, method, path, field string) (string, error) {
	status, body, err := callAPI(ctx, c.client, method, c.base+path, "")
	if err != nil {
		return "", fmt.Errorf("bench api: %s %s: %w", method, path, err)
	}
	if status/100 != 2 {
		return "", fmt.Errorf("bench api: %s %s answered %d: %.200s", method, path, status, body)
	}
	if field == "" {
		return "", nil
	}
	v, err := answerField(body, field)
	if err != nil {
		return "", fmt.Errorf("bench api: %s %s: %w", method, path, err)
	}
	return v, nil
}

// callAPI sends method url, with body as JSON unless it is "", and
// returns the answer's status and its body (at most 1 MiB).
func callAPI(ctx context.Context, client *http.Client, method, url, body string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, out, err
}

// fillIDs replaces each {name} of path with ids[name].
func fillIDs(path string, ids map[string]string) string {
	for k, v := range ids {
		path = strings.ReplaceAll(path, "{"+k+"}", v)
	}
	return path
}

// answerField returns the field of a JSON body at a dotted path such as
// "items.0.id", a string or a number, as a string; "" when there is none.
func answerField(body []byte, field string) (string, error) {
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return "", err
	}
	for _, k := range strings.Split(field, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(x) {
				return "", nil
			}
			v = x[i]
		default:
			return "", nil
		}
	}
	switch x := v.(type) {
	case string:
		return x, nil
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	}
	return "", nil
}

// waitFor polls GET path until the answer has field, for two minutes at
// most (the demo's world changes every few seconds).
func (c benchClient) waitFor(ctx context.Context, path, field string) (v string, err error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if benchstat.Until(ctx, 200*time.Millisecond, func() (bool, error) {
		v, err = c.call(ctx, http.MethodGet, path, field)
		return err != nil || v != "", nil
	}) != nil {
		return "", fmt.Errorf("bench api: no %s in GET %s after two minutes", field, path)
	}
	return v, err
}

// runLoadTarget is the hidden `bench load` (benchstat.LoadArgs): the load
// process of the benches.
func runLoadTarget(ctx context.Context, stdin io.Reader, stdout io.Writer) error {
	var l benchstat.Load
	if err := json.NewDecoder(io.LimitReader(stdin, 64<<20)).Decode(&l); err != nil {
		return fmt.Errorf("bench load: stdin: %w", err)
	}
	if err := l.Validate(); err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(l.Run(ctx))
}

// selfCommand runs this binary with args: a bench's helper process. Tests
// point it at the test binary.
var selfCommand = func(args ...string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	return exec.Command(exe, args...)
}
