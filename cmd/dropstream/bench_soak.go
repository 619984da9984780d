package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/settings"
	"github.com/dropstream/dropstream/internal/tick"
)

// The soak bench runs `demo` and `run`, idle and lightly loaded, side by
// side for an hour, sampled every few minutes.

// soakConfig is the bench's flags.
type soakConfig struct {
	// Duration is the whole run. Default 60m.
	Duration time.Duration `flag:"duration" default:"1h" help:"how long the four processes run"`
	// Every is the sampling period. Default 5m.
	Every time.Duration `flag:"every" default:"5m" help:"sampling period"`
	// Settle is when the verdict's reference figures are taken. Default
	// half the duration, when the demo's 30-minute records start to expire.
	Settle time.Duration `flag:"settle" help:"the sample the verdict compares the end against (0: half the duration)"`
	// Load is the loaded processes' requests per second each. Default 4.
	Load float64 `flag:"load" default:"4" help:"requests per second to each loaded process"`
	// Binary is the dropstream binary run; default this one.
	Binary string `flag:"binary" help:"dropstream binary to run (default: this one)"`
	// RedisServer is the redis-server of each `run`. Default the one on PATH.
	RedisServer string
	// Dir keeps logs, heap profiles and key families. Default a new
	// temporary directory.
	Dir string `flag:"dir" help:"directory for the processes' logs and heap profiles (default: a new temporary one)"`
}

// Validate checks the ranges; Settle must leave at least one sample after it.
func (c soakConfig) Validate() error {
	switch {
	case c.Every <= 0 || c.Duration < 2*c.Every:
		return fmt.Errorf("duration %s must be at least two sampling periods (--every %s)", c.Duration, c.Every)
	case c.Settle < 0 || c.Settle > c.Duration-c.Every:
		return fmt.Errorf("settle %s: want 0 (half the duration) up to duration minus one period", c.Settle)
	case c.Load <= 0 || c.Load > 40:
		return fmt.Errorf("load %v requests/s: want more than 0 and at most 40 (the API's default write limit is 50/s per caller)", c.Load)
	}
	return nil
}

// settle is Settle, or half the duration rounded down to a whole period.
func (c soakConfig) settle() time.Duration {
	if c.Settle > 0 {
		return c.Settle
	}
	return max(c.Every, (c.Duration / 2).Truncate(c.Every))
}

func runBenchSoak(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c soakConfig
	fs := flag.NewFlagSet("bench soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	settings.BindFlags(fs, &c)
	fs.StringVar(&c.RedisServer, "redis-server", "redis-server", "redis-server to start for each `run`")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: dropstream bench soak [flags]\n\nRuns `demo` and `run` (each on a private redis-server), idle and under a light HTTP load,\n"+
			"side by side; samples RSS (the peak of each period), live heap, goroutines and Redis keys; the verdict: no figure grows\nmore than 10% from the settle sample to the end.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := c.Validate(); err != nil {
		return err
	}
	if c.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		c.Binary = exe
	}
	if c.Dir == "" {
		dir, err := os.MkdirTemp("", "dropstream-soak-")
		if err != nil {
			return err
		}
		c.Dir = dir
	} else if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return err
	}
	return soak(ctx, c, stdout)
}

// soakProc is one process under test.
type soakProc struct {
	name   string // "demo-idle", …
	cmd    string // "demo" or "run"
	loaded bool
	api    string // host:port
	pprof  string // host:port
	// redisURL is the Redis whose keys are counted.
	redisURL string
	rdb      *redis.Client
	proc     *exec.Cmd
	exited   chan error
	samples  []soakSample
	load     *soakLoad
	rss      rssPeak
}

func soak(ctx context.Context, c soakConfig, out io.Writer) error {
	settle := c.settle()
	fmt.Fprintf(out, "soak: %s, a sample every %s, verdict from the %s sample; load %.1f req/s per loaded process; binary %s; logs and profiles in %s\n",
		c.Duration, c.Every, settle, c.Load, c.Binary, c.Dir)
	fmt.Fprintf(out, "soak: rss is the largest resident set since the sample before (read every %s); heap the median of %d reads, each after a forced GC\n",
		soakRSSEvery, soakHeapReads)
	fmt.Fprintln(out, "soak: settings changed from the defaults: DROPSTREAM_API_ADDR and DROPSTREAM_PPROF_ADDR (free loopback ports), "+
		"DROPSTREAM_REDIS_URL of each run (its own redis-server: --save '' --appendonly no); everything else is the binary's default")
	procs := []*soakProc{{name: "demo-idle", cmd: "demo"}, {name: "demo-loaded", cmd: "demo", loaded: true},
		{name: "run-idle", cmd: "run"}, {name: "run-loaded", cmd: "run", loaded: true}}
	var stops []func()
	defer func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}()
	for _, p := range procs {
		stop, err := p.start(ctx, c)
		stops = append(stops, stop)
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, p := range procs {
		wg.Go(func() { p.rss.watch(ctx, p.proc.Process.Pid) })
		if p.loaded {
			p.load = newSoakLoad("http://"+p.api, c.Load)
			wg.Go(func() { p.load.run(ctx) })
		}
	}
	tick := time.NewTicker(c.Every)
	defer tick.Stop()
	for at := c.Every; at <= c.Duration; at += c.Every {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		for _, p := range procs {
			select {
			case err := <-p.exited:
				return fmt.Errorf("%s exited early: %v (its log: %s)", p.name, err, p.logPath(c))
			default:
			}
			s, err := p.sample(ctx, at)
			if err != nil {
				return fmt.Errorf("%s at %s: %w", p.name, at, err)
			}
			s.RSS = p.rss.take(s.RSS)
			p.samples = append(p.samples, s)
			fmt.Fprintln(out, s.line(p.name, p.load))
			p.saveFamilies(ctx, filepath.Join(c.Dir, fmt.Sprintf("%s-keys-%s.txt", p.name, at)))
			if at == settle || at+c.Every > c.Duration {
				p.heapProfile(ctx, filepath.Join(c.Dir, fmt.Sprintf("%s-heap-%s.pb.gz", p.name, at)))
			}
		}
	}
	cancel()
	wg.Wait()
	rows := make([]soakRow, len(procs))
	for i, p := range procs {
		rows[i] = soakRowOf(p.name, p.cmd == "demo", p.samples, settle)
	}
	writeSoakTable(out, rows, settle)
	for _, p := range procs {
		if p.load != nil {
			fmt.Fprintf(out, "load on %s: %s\n", p.name, p.load.summary())
		}
	}
	for _, r := range rows {
		if !r.ok() {
			return errors.New("soak: a process grew more than 10% after the settle sample")
		}
	}
	return nil
}

func (p *soakProc) logPath(c soakConfig) string { return filepath.Join(c.Dir, p.name+".log") }

// start starts the process (and, for run, its redis-server) and waits for
// its API to be ready; stop ends both, whatever start returned.
func (p *soakProc) start(ctx context.Context, c soakConfig) (stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	env := os.Environ()
	if p.cmd == "run" {
		port, err := freeLoopbackPort()
		if err != nil {
			return stop, err
		}
		rs, end := terminable(ctx, c.RedisServer, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", c.Dir, "--logfile", filepath.Join(c.Dir, p.name+"-redis.log"))
		stops = append(stops, func() { end(); _ = rs.Wait() })
		if err := rs.Start(); err != nil {
			return stop, fmt.Errorf("redis-server: %w", err)
		}
		p.redisURL = fmt.Sprintf("redis://127.0.0.1:%d/0", port)
		env = append(env, "DROPSTREAM_REDIS_URL="+p.redisURL)
	}
	for _, addr := range []*string{&p.api, &p.pprof} {
		port, err := freeLoopbackPort()
		if err != nil {
			return stop, err
		}
		*addr = "127.0.0.1:" + strconv.Itoa(port)
	}
	env = append(env, "DROPSTREAM_API_ADDR="+p.api, "DROPSTREAM_PPROF_ADDR="+p.pprof)
	logf, err := os.Create(p.logPath(c))
	if err != nil {
		return stop, err
	}
	stops = append(stops, func() { logf.Close() })
	proc, end := terminable(ctx, c.Binary, p.cmd)
	p.proc = proc
	p.proc.Env = env
	p.proc.Stderr = logf
	stdout, err := p.proc.StdoutPipe()
	if err != nil {
		return stop, err
	}
	if err := p.proc.Start(); err != nil {
		end()
		return stop, err
	}
	p.exited = make(chan error, 1)
	waited := make(chan struct{})
	go func() { p.exited <- p.proc.Wait(); close(waited) }()
	stops = append(stops, func() { end(); <-waited })
	urls := make(chan string, 1)
	go func() { // the demo's output names its embedded Redis; the rest goes to the log
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := embeddedRedisURL(sc.Text()); ok {
				urls <- u
			} else {
				fmt.Fprintln(logf, sc.Text())
			}
		}
	}()
	deadline := time.After(2 * time.Minute)
	if p.cmd == "demo" {
		select {
		case p.redisURL = <-urls:
		case err := <-p.exited:
			return stop, fmt.Errorf("exited at start: %v (its log: %s)", err, p.logPath(c))
		case <-deadline:
			return stop, errors.New("no embedded Redis URL on its output within 2 minutes")
		case <-ctx.Done():
			return stop, ctx.Err()
		}
	}
	opt, err := redis.ParseURL(p.redisURL)
	if err != nil {
		return stop, fmt.Errorf("redis url: %w", err)
	}
	// A loaded demo's embedded Redis may take seconds to answer: a sample
	// waits up to its own minute, not go-redis's default 3 s.
	opt.ReadTimeout, opt.WriteTimeout = 30*time.Second, 30*time.Second
	p.rdb = redis.NewClient(opt)
	stops = append(stops, func() { _ = p.rdb.Close() })
	for {
		if resp, err := http.Get("http://" + p.api + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return stop, nil
			}
		}
		select {
		case err := <-p.exited:
			return stop, fmt.Errorf("exited at start: %v (its log: %s)", err, p.logPath(c))
		case <-deadline:
			return stop, errors.New("API not ready within 2 minutes")
		case <-ctx.Done():
			return stop, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// embeddedRedisURL is the URL of the demo's "embedded Redis at" line.
func embeddedRedisURL(line string) (string, bool) {
	_, rest, ok := strings.Cut(line, "(redis-cli -u ")
	if !ok || !strings.Contains(line, "embedded Redis") {
		return "", false
	}
	u, _, ok := strings.Cut(rest, ")")
	return u, ok && u != ""
}

// terminable is the command name args, which end stops: SIGTERM, and a
// kill 20 seconds on.
func terminable(ctx context.Context, name string, args ...string) (cmd *exec.Cmd, end func()) {
	ctx, end = context.WithCancel(ctx)
	cmd = exec.CommandContext(ctx, name, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 20 * time.Second
	return cmd, end
}

// freeLoopbackPort is a TCP port free on 127.0.0.1 a moment ago.
func freeLoopbackPort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// soakRSSEvery is how often a process's resident set is read between
// samples.
const soakRSSEvery = 10 * time.Second

// rssPeak keeps the largest resident set of a process since the last
// take. One read moves by ±10 % with where the heap is in its GC cycle
// (a collected heap is returned to the OS later); the peak over a
// sampling period is what the process needs, and it does not.
type rssPeak struct {
	mu   sync.Mutex
	peak float64
}

// watch reads the resident set of pid every soakRSSEvery until ctx ends.
// A failed read is skipped: the sample's own read still counts.
func (w *rssPeak) watch(ctx context.Context, pid int) {
	proc, err := procfs.NewProc(pid)
	if err != nil {
		return
	}
	tick.Every(ctx, soakRSSEvery, func() {
		if st, err := proc.Stat(); err == nil {
			w.observe(float64(st.ResidentMemory()))
		}
	})
}

func (w *rssPeak) observe(rss float64) {
	w.mu.Lock()
	w.peak = max(w.peak, rss)
	w.mu.Unlock()
}

// take returns the largest of rss and the reads since the last take, and
// starts a new period.
func (w *rssPeak) take(rss float64) float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	peak := max(w.peak, rss)
	w.peak = 0
	return peak
}
