package checkoutbench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
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
	"github.com/dropstream/dropstream/stream"
)

// Phase is the figures of one run.
type Phase struct {
	// Checkouts answered, by answer: OK 200, Failed 400, Errors anything
	// else (a transport error, 5xx).
	Checkouts, OK, Failed, Errors int
	Elapsed                       time.Duration
	P50, P99, Max                 time.Duration
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
	progress := cfg.Progress
	if progress == nil {
		progress = func(string) {}
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
	for _, path := range []string{
		fmt.Sprintf("/stock/batch_init/%d/%d/%d", cfg.Items, cfg.Stock, cfg.Price),
		fmt.Sprintf("/payment/batch_init/%d/%d", cfg.Users, cfg.Credit),
		fmt.Sprintf("/orders/batch_init/%d/%d/%d/%d", cfg.Orders, cfg.Items, cfg.Users, cfg.Price),
	} {
		if code, _ := b.post(ctx, path); code != http.StatusOK {
			return res, fmt.Errorf("checkoutbench: POST %s answered %d", path, code)
		}
	}
	res.Setup = time.Since(start)
	progress(fmt.Sprintf("batch_init of %d items, %d users, %d orders in %s", cfg.Items, cfg.Users, cfg.Orders, res.Setup.Round(time.Millisecond)))
	res.Throughput = b.closedLoop(ctx)
	progress(fmt.Sprintf("throughput run: %d checkouts in %s", res.Throughput.Checkouts, res.Throughput.Elapsed.Round(time.Millisecond)))
	res.Latency = b.openLoop(ctx)
	progress(fmt.Sprintf("latency run: %d checkouts in %s", res.Latency.Checkouts, res.Latency.Elapsed.Round(time.Millisecond)))
	res.Inconsistencies, res.Checked, err = b.check(ctx)
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

// closedLoop runs Clients clients back to back for Duration.
func (b *bench) closedLoop(ctx context.Context) Phase {
	rec := &recorder{}
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
	return rec.phase(time.Since(start))
}

// openLoop sends Rate checkouts/s for LatencyDuration, each in its own
// goroutine, whatever the answers' latency.
func (b *bench) openLoop(ctx context.Context) Phase {
	rec := &recorder{}
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
	return rec.phase(time.Since(start))
}

// recorder collects answers and latencies.
type recorder struct {
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
}

func (r *recorder) phase(elapsed time.Duration) Phase {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := Phase{Checkouts: len(r.lat), OK: r.ok, Failed: r.fail, Errors: r.errs, Elapsed: elapsed}
	if len(r.lat) == 0 {
		return p
	}
	slices.Sort(r.lat)
	q := func(f float64) time.Duration { return r.lat[min(len(r.lat)-1, int(f*float64(len(r.lat))))] }
	p.P50, p.P99, p.Max = q(0.50), q(0.99), r.lat[len(r.lat)-1]
	return p
}
