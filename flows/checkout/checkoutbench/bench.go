package checkoutbench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/flows/checkout"
	"github.com/dropstream/dropstream/flows/checkout/httpapi"
	"github.com/dropstream/dropstream/internal/benchstat"
	"github.com/dropstream/dropstream/internal/progress"
	"github.com/dropstream/dropstream/stream"
)

// Phase is the figures of one run.
type Phase struct {
	// Checkouts answered, by answer: OK 200, Failed 400, Errors anything
	// else (a transport error, 5xx).
	Checkouts, OK, Failed, Errors int
	Elapsed                       time.Duration
	P50, P99, Max                 time.Duration
	// CPU is the CPU per checkout of this process (the stages, the API
	// and the bench's HTTP clients, which run in it) and of Redis.
	CPU benchstat.CPU
}

// PerSecond is answered checkouts per second.
func (p Phase) PerSecond() float64 {
	if p.Elapsed <= 0 {
		return 0
	}
	return float64(p.Checkouts) / p.Elapsed.Seconds()
}

// Result is a whole bench.
type Result struct {
	Setup      time.Duration
	Throughput Phase
	Latency    Phase
	// Inconsistencies lists every disagreement found by the final check
	// (empty when consistent); Checked is the number of orders checked.
	Inconsistencies []string
	Checked         int
	// Exchange is the process CPU per request of the same clients posting
	// to an empty handler on a loopback server in this process: the bare
	// HTTP exchange, client and server, with no flow behind it.
	Exchange time.Duration
}

// bench is one run's state.
type bench struct {
	cfg    Config
	rdb    redis.UniversalClient
	svc    *checkout.Flow
	base   string
	client *http.Client
	perm   []int
	next   atomic.Int64
	mu     sync.Mutex
	answer map[int]int // order → HTTP status of its checkout
}

// Run runs the bench against rdb, whose database should hold no other
// checkout data.
func Run(ctx context.Context, rdb redis.UniversalClient, pub *stream.Publisher, cfg Config) (Result, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	svc, err := checkout.NewWith(rdb, pub, checkout.Config{Partitions: cfg.Partitions, Wait: cfg.Wait}, cfg.Telemetry)
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	wg.Go(func() { _ = svc.Run(ctx) })
	for _, s := range svc.Stages() {
		for range cfg.Copies {
			r, err := stream.NewRunner(rdb, s, cfg.Telemetry)
			if err != nil {
				return Result{}, err
			}
			wg.Go(func() { _ = r.Run(ctx) })
		}
	}
	srv, err := api.New(api.Config{Addr: "127.0.0.1:0", Logger: cfg.Telemetry.Logger, TracerProvider: cfg.Telemetry.TracerProvider,
		MeterProvider: cfg.Telemetry.MeterProvider, RateLimit: cfg.RateLimit})
	if err != nil {
		return Result{}, err
	}
	httpapi.Register(srv, svc)
	served := make(chan error, 1)
	wg.Go(func() { served <- srv.Listen(ctx) })
	select {
	case <-srv.Listening():
	case err := <-served:
		return Result{}, fmt.Errorf("checkoutbench: api: %w", err)
	}
	select {
	case <-svc.Ready():
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
	tr := &http.Transport{MaxIdleConns: 8192, MaxIdleConnsPerHost: 8192}
	defer tr.CloseIdleConnections()
	b := &bench{cfg: cfg, rdb: rdb, svc: svc, base: "http://" + srv.Addr(), client: &http.Client{Transport: tr, Timeout: time.Minute},
		perm: rand.Perm(cfg.Orders), answer: make(map[int]int, cfg.Orders)}
	var res Result
	start := time.Now()
	phase := cfg.Progress.Start("batch_init", 3)
	for _, path := range []string{
		fmt.Sprintf("/stock/batch_init/%d/%d/%d", cfg.Items, cfg.Stock, cfg.Price),
		fmt.Sprintf("/payment/batch_init/%d/%d", cfg.Users, cfg.Credit),
		fmt.Sprintf("/orders/batch_init/%d/%d/%d/%d", cfg.Orders, cfg.Items, cfg.Users, cfg.Price),
	} {
		if code, _ := b.post(ctx, path); code != http.StatusOK {
			return res, fmt.Errorf("checkoutbench: POST %s answered %d", path, code)
		}
		phase.Add(1)
	}
	res.Setup = time.Since(start)
	phase.Done(fmt.Sprintf("%d items, %d users, %d orders", cfg.Items, cfg.Users, cfg.Orders))
	// The throughput run ends at its duration or when the orders run out.
	phase = cfg.Progress.Start("throughput run", 0)
	res.Throughput = b.run(ctx, phase, b.closedLoop)
	phase.Done(fmt.Sprintf("%.0f checkouts/s", res.Throughput.PerSecond()))
	phase = cfg.Progress.Start("latency run", int64(float64(cfg.Rate)*cfg.LatencyDuration.Seconds()))
	res.Latency = b.run(ctx, phase, b.openLoop)
	phase.Done(fmt.Sprintf("p99 %s", res.Latency.P99.Round(10*time.Microsecond)))
	phase = cfg.Progress.Start("bare HTTP exchange", int64(res.Throughput.Checkouts))
	if res.Exchange, err = b.exchange(ctx, phase, res.Throughput.Checkouts); err != nil {
		return res, err
	}
	phase.Done("")
	phase = cfg.Progress.Start("consistency check", int64(cfg.Orders))
	res.Inconsistencies, res.Checked, err = b.check(ctx)
	phase.Set(int64(res.Checked))
	phase.Done(fmt.Sprintf("%d inconsistencies", len(res.Inconsistencies)))
	return res, err
}

// post sends a POST and returns its status (0 on a transport error).
func (b *bench) post(ctx context.Context, path string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.base+path, nil)
	if err != nil {
		return 0, err
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// checkoutOne checks the next order of the permutation out; false when
// every order has been used.
func (b *bench) checkoutOne(ctx context.Context, rec *recorder) bool {
	i := int(b.next.Add(1)) - 1
	if i >= len(b.perm) {
		return false
	}
	order := b.perm[i]
	start := time.Now()
	code, _ := b.post(ctx, "/orders/checkout/"+strconv.Itoa(order))
	rec.add(code, time.Since(start))
	b.mu.Lock()
	b.answer[order] = code
	b.mu.Unlock()
	return true
}

// run runs one loop with its answers counted on phase, and measures the
// CPU per checkout.
func (b *bench) run(ctx context.Context, phase *progress.Phase, loop func(context.Context, *recorder) time.Duration) Phase {
	rec := &recorder{progress: phase}
	cpu := benchstat.ReadCPU(ctx, b.rdb)
	p := rec.phase(loop(ctx, rec))
	p.CPU = benchstat.ReadCPU(ctx, b.rdb).PerItem(cpu, p.Checkouts)
	return p
}

// exchange is the process CPU per request of n POSTs by Clients clients to
// an empty handler on a loopback server of this process.
func (b *bench) exchange(ctx context.Context, phase *progress.Phase, n int) (time.Duration, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("checkoutbench: exchange: %w", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), ReadHeaderTimeout: time.Minute}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	tr := &http.Transport{MaxIdleConns: 8192, MaxIdleConnsPerHost: 8192}
	defer tr.CloseIdleConnections()
	c := &bench{base: "http://" + ln.Addr().String(), client: &http.Client{Transport: tr, Timeout: time.Minute}}
	var next, failed atomic.Int64
	cpu := benchstat.ProcessCPU()
	var wg sync.WaitGroup
	for range b.cfg.Clients {
		wg.Go(func() {
			for next.Add(1) <= int64(n) && ctx.Err() == nil {
				if code, _ := c.post(ctx, "/"); code != http.StatusOK {
					failed.Add(1)
				}
				phase.Add(1)
			}
		})
	}
	wg.Wait()
	if f := failed.Load(); f > 0 || n == 0 {
		return 0, fmt.Errorf("checkoutbench: exchange: %d of %d requests failed", f, n)
	}
	return (benchstat.ProcessCPU() - cpu) / time.Duration(n), nil
}

// closedLoop runs Clients clients back to back for Duration.
func (b *bench) closedLoop(ctx context.Context, rec *recorder) time.Duration {
	start := time.Now()
	end := start.Add(b.cfg.Duration)
	var wg sync.WaitGroup
	for range b.cfg.Clients {
		wg.Go(func() {
			for time.Now().Before(end) && ctx.Err() == nil && b.checkoutOne(ctx, rec) {
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// openLoop sends Rate checkouts/s for LatencyDuration, each in its own
// goroutine, whatever the answers' latency.
func (b *bench) openLoop(ctx context.Context, rec *recorder) time.Duration {
	const tick = 10 * time.Millisecond
	perTick := float64(b.cfg.Rate) * tick.Seconds()
	t := time.NewTicker(tick)
	defer t.Stop()
	var wg sync.WaitGroup
	start := time.Now()
	due := 0.0
	for time.Since(start) < b.cfg.LatencyDuration && ctx.Err() == nil {
		due += perTick
		for ; due >= 1; due-- {
			wg.Go(func() { b.checkoutOne(ctx, rec) })
		}
		<-t.C
	}
	wg.Wait()
	return time.Since(start)
}

// recorder collects answers and latencies, and counts them on its
// progress phase.
type recorder struct {
	progress *progress.Phase
	mu       sync.Mutex
	lat      []time.Duration
	ok, fail int
	errs     int
}

func (r *recorder) add(code int, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch code {
	case http.StatusOK:
		r.ok++
	case http.StatusBadRequest:
		r.fail++
	default:
		r.errs++
	}
	r.lat = append(r.lat, d)
	r.progress.Set(int64(len(r.lat)))
}

func (r *recorder) phase(elapsed time.Duration) Phase {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := Phase{Checkouts: len(r.lat), OK: r.ok, Failed: r.fail, Errors: r.errs, Elapsed: elapsed}
	if len(r.lat) == 0 {
		return p
	}
	slices.Sort(r.lat)
	p.P50, p.P99, p.Max = benchstat.Quantile(r.lat, 0.50), benchstat.Quantile(r.lat, 0.99), r.lat[len(r.lat)-1]
	return p
}
