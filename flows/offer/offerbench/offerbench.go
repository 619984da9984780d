// Package offerbench measures the sell-offer search: searches that miss
// and fan out to every handler, and searches served from the result
// cache. `dropstream bench offers` and BenchmarkSearch run it.
package offerbench

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/flows/offer"
	"github.com/dropstream/dropstream/internal/benchstat"
	"github.com/dropstream/dropstream/internal/progress"
	"github.com/dropstream/dropstream/stream"
)

// Targets of the sell-offer search (BENCHMARKS.md).
const (
	TargetHitP99  = 2 * time.Millisecond
	TargetMissP99 = 50 * time.Millisecond
)

// Config sizes a bench. Zero fields take the documented defaults.
type Config struct {
	// Offers spread round robin over the handlers. Default 100,000.
	Offers int
	// Products the offers are spread over. Default 2,000.
	Products int
	// Misses is the number of distinct searches, each a miss. Default 200.
	Misses int
	// Hits is the number of cached searches. Default 5,000.
	Hits int
	// Broad adds that many misses without a product element: every
	// handler prices all its offers. Default 0.
	Broad int
	// Partitions of the flow. Default 8.
	Partitions int
	// Handlers are the flow's handlers. Default offer.DefaultHandlers.
	Handlers []offer.HandlerSpec
	// Telemetry of the service and stages.
	Telemetry stream.Telemetry
	// Progress, when set, shows each phase: seeding, loading, catching
	// up, then each kind of search.
	Progress *progress.Printer
}

// WithDefaults fills the zero fields.
func (c Config) WithDefaults() Config {
	c.Offers = cmp.Or(c.Offers, 100_000)
	c.Products = cmp.Or(c.Products, 2000)
	c.Misses = cmp.Or(c.Misses, 200)
	c.Hits = cmp.Or(c.Hits, 5000)
	c.Partitions = cmp.Or(c.Partitions, 8)
	return c
}

// Validate checks a defaulted config.
func (c Config) Validate() error {
	if c.Offers < 1 || c.Offers > 10_000_000 || c.Products < 1 || c.Misses < 1 || c.Hits < 1 || c.Broad < 0 {
		return fmt.Errorf("offerbench: offers %d (1..10M), products %d, misses %d, hits %d must be positive, broad %d not negative",
			c.Offers, c.Products, c.Misses, c.Hits, c.Broad)
	}
	return nil
}

// Latencies summarizes one kind of search.
type Latencies struct {
	Count         int
	P50, P99, Max time.Duration
	// Matches is the mean number of matching offers per search.
	Matches float64
	// CPU is the CPU per search of this process (the searches run in it)
	// and of Redis.
	CPU benchstat.CPU
}

func summarize(ds []time.Duration, matches int, cpu benchstat.CPU) Latencies {
	slices.Sort(ds)
	return Latencies{Count: len(ds), P50: benchstat.Quantile(ds, 0.50), P99: benchstat.Quantile(ds, 0.99), Max: ds[len(ds)-1], Matches: float64(matches) / float64(len(ds)), CPU: cpu}
}

// Result are the bench's figures.
type Result struct {
	Seed time.Duration
	// Warm is the time to load every handler's view of its offers.
	Warm time.Duration
	// First is the first search.
	First time.Duration
	Miss  Latencies
	Broad Latencies
	Hit   Latencies
}

// Run seeds the offers in rdb's (empty) database, runs the handler stages
// and measures the searches.
func Run(ctx context.Context, rdb redis.UniversalClient, cfg Config) (Result, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	if err := benchstat.CheckEmpty(ctx, rdb, "offerbench"); err != nil {
		return Result{}, err
	}
	svc, err := offer.NewWith(ctx, rdb, offer.Config{Partitions: cfg.Partitions, Handlers: cfg.Handlers, MaxWait: 10 * time.Second,
		Runner: stream.RunnerConfig{Block: 100 * time.Millisecond}}, cfg.Telemetry)
	if err != nil {
		return Result{}, err
	}
	defer func() { _ = svc.Close() }()
	var res Result
	start := time.Now()
	offers := offer.SampleOffers(1, cfg.Offers, cfg.Products, svc.Config().Handlers)
	phase := cfg.Progress.Start("seed offers", int64(len(offers)))
	for i := 0; i < len(offers); i += 5000 {
		if _, err := svc.Catalog().Put(ctx, offers[i:min(i+5000, len(offers))]...); err != nil {
			return Result{}, err
		}
		phase.Set(int64(min(i+5000, len(offers))))
	}
	res.Seed = time.Since(start)
	phase.Done(fmt.Sprintf("over %d handlers", len(svc.Config().Handlers)))

	start = time.Now()
	phase = cfg.Progress.Start("load handler views", 0)
	if err := svc.Warm(ctx); err != nil {
		return Result{}, err
	}
	res.Warm = time.Since(start)
	phase.Done("")
	stop, err := benchstat.RunStages(ctx, rdb, cfg.Telemetry, 1, svc.Stages()...)
	if err != nil {
		return Result{}, err
	}
	defer stop()
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	wg.Go(func() { _ = svc.RunFresh(runCtx) })
	phase = cfg.Progress.Start("freshness keeper catching up", 0)
	for {
		ok, err := svc.CaughtUp(ctx)
		if err != nil {
			return Result{}, err
		}
		if ok {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	phase.Done("")

	search := func(req offer.SearchRequest) (time.Duration, offer.SearchResponse, error) {
		t0 := time.Now()
		resp, err := svc.Search(ctx, req, "")
		took := time.Since(t0)
		if err == nil && resp.Status != offer.StatusComplete {
			err = fmt.Errorf("offerbench: search answered %s after %s", resp.Status, took)
		}
		return took, resp, err
	}
	if res.First, _, err = search(request(-1, 1)); err != nil {
		return Result{}, err
	}

	// measure times n searches req(i), each answered with outcome want
	// ("" for any).
	measure := func(name string, n int, req func(int) offer.SearchRequest, want string) (Latencies, error) {
		var times []time.Duration
		matches := 0
		phase, cpu := cfg.Progress.Start(name, int64(n)), benchstat.ReadCPU(ctx, rdb)
		for i := range n {
			took, resp, err := search(req(i))
			if err != nil {
				return Latencies{}, err
			}
			if want != "" && resp.Outcome != want {
				return Latencies{}, fmt.Errorf("offerbench: search %d of the %s was a %s, want a %s", i, name, resp.Outcome, want)
			}
			times, matches = append(times, took), matches+resp.Total
			phase.Add(1)
		}
		l := summarize(times, matches, benchstat.ReadCPU(ctx, rdb).PerItem(cpu, n))
		phase.Done(fmt.Sprintf("p50 %s, p99 %s", l.P50, l.P99))
		return l, nil
	}
	miss := func(i int) offer.SearchRequest { return request(i, cfg.Products) }
	if res.Miss, err = measure("misses", cfg.Misses, miss, offer.OutcomeMiss); err != nil {
		return Result{}, err
	}
	if cfg.Broad > 0 {
		if res.Broad, err = measure("broad misses", cfg.Broad, broad, ""); err != nil {
			return Result{}, err
		}
	}
	// The hits repeat the misses' searches.
	hit := func(i int) offer.SearchRequest { return miss(i % cfg.Misses) }
	if res.Hit, err = measure("hits", cfg.Hits, hit, offer.OutcomeHit); err != nil {
		return Result{}, err
	}
	return res, nil
}

// request is distinct search i: three products and the average price over
// 2 locations × 2 payment × 2 delivery methods.
func request(i, products int) offer.SearchRequest {
	var ps []string
	for j := range 3 {
		ps = append(ps, "p"+strconv.Itoa((i*3+j+3*products)%products))
	}
	q := int64(1)
	if i >= 0 {
		q += int64(i/max(1, products/3)) % 5
	}
	return offer.SearchRequest{Filter: offer.Element{Type: offer.TypeGroup, FilterType: "sellOffer", Elements: []offer.Element{
		{Type: offer.TypeLogical, LogicalTag: offer.TagProduct, ProductIDs: ps},
		{Type: offer.TypeComplexFilter, ComplexFilter: &offer.Element{Type: offer.TypeGroup, FilterType: "orderPrice", Elements: []offer.Element{
			{Type: offer.TypeLogical, LogicalTag: offer.TagAggregated, OrderQuantity: q, DeliverToLocationIDs: []string{"loc1", "loc2"},
				PaymentMethodIDs: []string{"card", "cash"}, DeliveryMethodIDs: []string{"post", "courier"}, Aggregate: offer.AggAverage}}}}}}}
}

// broad is distinct search i over every offer: the minimum price over 2 × 2
// × 2 combinations, bounded so about 1% of the offers match.
func broad(i int) offer.SearchRequest {
	maxPrice := int64(400 + i)
	return offer.SearchRequest{Filter: offer.Element{Type: offer.TypeGroup, FilterType: "sellOffer", Elements: []offer.Element{
		{Type: offer.TypeLogical, LogicalTag: offer.TagAggregated, OrderQuantity: 1, DeliverToLocationIDs: []string{"loc3", "loc4"},
			PaymentMethodIDs: []string{"card", "transfer"}, DeliveryMethodIDs: []string{"post", "pickup"}, Aggregate: offer.AggMin,
			MaxPrice: &maxPrice}}}}
}
