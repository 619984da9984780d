package checkoutbench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/flows/checkout"
	"github.com/dropstream/dropstream/flows/checkout/httpapi"
	"github.com/dropstream/dropstream/internal/benchstat"
	"github.com/dropstream/dropstream/internal/settings"
	"github.com/dropstream/dropstream/stream"
)

// Phase is the figures of one run.
type Phase struct {
	// Checkouts answered, by answer: OK 200, Failed 400, Errors anything
	// else (a transport error, 5xx).
	Checkouts, OK, Failed, Errors int
	Elapsed                       time.Duration
	// Latencies are from each checkout's due time.
	benchstat.Latencies
	// CPU is the CPU per checkout of this process (the stages and the
	// API; the clients run apart unless Config.Load is nil) and of Redis.
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
}

// bench is one run's state.
type bench struct {
	cfg    Config
	rdb    redis.UniversalClient
	svc    *checkout.Flow
	base   string
	client *http.Client
	perm   []int
	next   int         // the permutation's next order
	answer map[int]int // order → HTTP status of its checkout
}

// Run runs the bench against rdb, whose database should hold no other
// checkout data.
func Run(ctx context.Context, rdb redis.UniversalClient, pub *stream.Publisher, cfg Config) (Result, error) {
	if err := settings.Prepare("checkoutbench", &cfg); err != nil {
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
	stop, err := stream.RunStages(ctx, rdb, cfg.Telemetry, cfg.Copies, svc.Stages()...)
	if err != nil {
		return Result{}, err
	}
	defer stop()
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
		if code := benchstat.Send(ctx, b.client, http.MethodPost, b.base+path); code != http.StatusOK {
			return res, fmt.Errorf("checkoutbench: POST %s answered %d", path, code)
		}
		phase.Add(1)
	}
	res.Setup = time.Since(start)
	phase.Done(fmt.Sprintf("%d items, %d users, %d orders", cfg.Items, cfg.Users, cfg.Orders))
	// The throughput run ends at its duration or when the orders run out.
	phase = cfg.Progress.Start("throughput run", 0)
	if res.Throughput, err = b.run(ctx, 0, cfg.Duration); err != nil {
		return res, err
	}
	phase.Done(fmt.Sprintf("%.0f checkouts/s", res.Throughput.PerSecond()))
	phase = cfg.Progress.Start("latency run", 0)
	if res.Latency, err = b.run(ctx, cfg.Rate, cfg.LatencyDuration); err != nil {
		return res, err
	}
	phase.Done(fmt.Sprintf("p99 %s", res.Latency.P99.Round(10*time.Microsecond)))
	phase = cfg.Progress.Start("consistency check", int64(cfg.Orders))
	res.Inconsistencies, res.Checked, err = b.check(ctx)
	phase.Set(int64(res.Checked))
	phase.Done(fmt.Sprintf("%d inconsistencies", len(res.Inconsistencies)))
	return res, err
}

// run checks out the next orders of the permutation from Clients
// connections, at rate checkouts/s (0: back to back), for d or until the
// orders run out, and measures the CPU per checkout.
func (b *bench) run(ctx context.Context, rate int, d time.Duration) (Phase, error) {
	first := b.next
	l := benchstat.Load{Method: http.MethodPost, URL: b.base + "/orders/checkout/{id}", Connections: b.cfg.Clients,
		Duration: d, Rate: rate, IDs: b.perm[first:]}
	cpu := benchstat.ReadCPU(ctx, b.rdb)
	r, err := l.RunBy(ctx, b.cfg.Self)
	if err != nil {
		return Phase{}, fmt.Errorf("checkoutbench: %w", err)
	}
	p := Phase{Checkouts: r.Requests, Elapsed: time.Duration(r.Seconds * float64(time.Second)), Latencies: r.Latencies}
	p.CPU = benchstat.ReadCPU(ctx, b.rdb).PerItem(cpu, p.Checkouts)
	for i, code := range r.Answers {
		switch code {
		case 0:
			continue
		case http.StatusOK:
			p.OK++
		case http.StatusBadRequest:
			p.Failed++
		default:
			p.Errors++
		}
		b.answer[b.perm[first+i]] = code
		b.next = first + i + 1 // the next phase starts after the last order sent
	}
	return p, nil
}

// checkChunk is how many reads go in one pipeline.
const checkChunk = 2000

// maxListed bounds the inconsistencies listed.
const maxListed = 20

// check compares the answers with Redis: an order answered 200 is paid,
// one answered 400 or never checked out is not, and the stock and credit
// taken equal what the paid orders hold. Other answers (5xx) are reported,
// not checked.
func (b *bench) check(ctx context.Context) ([]string, int, error) {
	keys := b.svc.Store().Keys()
	var out []string
	report := func(format string, args ...any) {
		if len(out) < maxListed {
			out = append(out, fmt.Sprintf(format, args...))
		} else if len(out) == maxListed {
			out = append(out, "…")
		}
	}
	takenStock := make([]int64, b.cfg.Items)
	takenCredit := make([]int64, b.cfg.Users)
	pending := 0
	for start := 0; start < b.cfg.Orders; start += checkChunk {
		pipe := b.rdb.Pipeline()
		cmds := make([]*redis.SliceCmd, 0, checkChunk)
		for i := start; i < min(b.cfg.Orders, start+checkChunk); i++ {
			cmds = append(cmds, pipe.HMGet(ctx, keys.Order(strconv.Itoa(i)), "paid", "items", "total_cost", "user_id", "status"))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, 0, fmt.Errorf("checkoutbench: read orders: %w", err)
		}
		for j, c := range cmds {
			i := start + j
			v := c.Val()
			paid := v[0] == "1"
			code, asked := b.answer[i]
			switch {
			case code == http.StatusOK && !paid:
				report("order %d answered 200 but is not paid", i)
			case (code == http.StatusBadRequest || !asked) && paid:
				report("order %d answered %d (asked %v) but is paid", i, code, asked)
			case asked && code != http.StatusOK && code != http.StatusBadRequest:
				pending++
			}
			if !paid {
				continue
			}
			s, _ := v[1].(string)
			total, _ := strconv.ParseInt(fmt.Sprint(v[2]), 10, 64)
			user, _ := strconv.Atoi(fmt.Sprint(v[3]))
			if user >= 0 && user < len(takenCredit) {
				takenCredit[user] += total
			}
			lines, err := checkout.ParseLines(s)
			if err != nil {
				report("order %d: %v", i, err)
				continue
			}
			for _, l := range lines {
				if n, err := strconv.Atoi(l.ID); err == nil && n >= 0 && n < len(takenStock) {
					takenStock[n] += l.Amount
				}
			}
		}
	}
	if pending > 0 {
		report("%d checkouts answered neither 200 nor 400 (not checked against their orders)", pending)
	}
	if err := b.compare(ctx, "item", "stock", b.cfg.Stock, takenStock, keys.Item, report); err != nil {
		return nil, 0, err
	}
	if err := b.compare(ctx, "user", "credit", b.cfg.Credit, takenCredit, keys.User, report); err != nil {
		return nil, 0, err
	}
	return out, b.cfg.Orders, nil
}

// compare checks start − current = taken for every entity.
func (b *bench) compare(ctx context.Context, noun, field string, start int64, taken []int64, key func(string) string, report func(string, ...any)) error {
	for from := 0; from < len(taken); from += checkChunk {
		pipe := b.rdb.Pipeline()
		cmds := make([]*redis.StringCmd, 0, checkChunk)
		for i := from; i < min(len(taken), from+checkChunk); i++ {
			cmds = append(cmds, pipe.HGet(ctx, key(strconv.Itoa(i)), field))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("checkoutbench: read %s: %w", field, err)
		}
		for j, c := range cmds {
			n, _ := c.Int64()
			if got := start - n; got != taken[from+j] {
				report("%s %d: %d %s taken, paid orders hold %d", noun, from+j, got, field, taken[from+j])
			}
		}
	}
	return nil
}
