// Package offerbench measures the sell-offer search: searches that miss
// and fan out to every handler, and searches served from the result
// cache. `dropstream bench offers` and BenchmarkSearch run it.
package offerbench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/flows/offer"
	"github.com/dropstream/dropstream/internal/benchstat"
	"github.com/dropstream/dropstream/internal/progress"
	"github.com/dropstream/dropstream/internal/settings"
	"github.com/dropstream/dropstream/stream"
)

// Targets of the sell-offer search (BENCHMARKS.md).
const (
	TargetHitP99  = 2 * time.Millisecond
	TargetMissP99 = 50 * time.Millisecond
)

// The settings the bench changes from the flow's defaults; its header
// prints them. resultTTL keeps the misses' results for the hits however
// long the run takes: the default (5m) expired them in a slow full-size run.
const (
	maxWait   = 10 * time.Second
	resultTTL = 24 * time.Hour
	readBlock = 100 * time.Millisecond
)

// Config sizes a bench. Zero fields take the documented defaults.
type Config struct {
	// Offers spread round robin over the handlers. Default 100,000.
	Offers int `flag:"offers" default:"100000" range:"1..10000000" help:"offers, round robin over the 3 handlers"`
	// Products the offers are spread over. Default 2,000.
	Products int `flag:"products" default:"2000" range:"1.." help:"products the offers are spread over"`
	// Misses is the number of distinct searches, each a miss. Default 200.
	Misses int `flag:"misses" default:"200" range:"1.." help:"distinct searches (each a miss)"`
	// Hits is the number of cached searches. Default 5,000.
	Hits int `flag:"hits" default:"5000" range:"1.." help:"cached searches"`
	// Broad adds that many misses without a product element: every
	// handler prices all its offers. Default 0.
	Broad int `range:"0.."`
	// Partitions of the flow. Default 8.
	Partitions int `default:"8"`
	// Handlers are the flow's handlers. Default offer.DefaultHandlers.
	Handlers []offer.HandlerSpec
	// Telemetry of the service and stages.
	Telemetry stream.Telemetry
	// Now is the flow's clock. Default time.Now.
	Now func() time.Time
	// Progress, when set, shows each phase: seeding, loading, catching
	// up, then each kind of search.
	Progress *progress.Printer
}

// Latencies summarizes one kind of search.
type Latencies struct {
	Count int
	benchstat.Latencies
	// Matches is the mean number of matching offers per search.
	Matches float64
	// CPU is the CPU per search of this process (the searches run in it)
	// and of Redis.
	CPU benchstat.CPU
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
	if err := settings.Prepare("offerbench", &cfg); err != nil {
		return Result{}, err
	}
	if err := benchstat.CheckEmpty(ctx, rdb, "offerbench"); err != nil {
		return Result{}, err
	}
	svc, err := offer.NewWith(ctx, rdb, offer.Config{Partitions: cfg.Partitions, Handlers: cfg.Handlers, MaxWait: maxWait,
		ResultTTL: resultTTL, Now: cfg.Now, Runner: stream.RunnerConfig{Block: readBlock}}, cfg.Telemetry)
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
	stop, err := stream.RunStages(ctx, rdb, cfg.Telemetry, 1, svc.Stages()...)
	if err != nil {
		return Result{}, err
	}
	defer stop()
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	wg.Go(func() { _ = svc.RunFresh(runCtx) })
	phase = cfg.Progress.Start("freshness keeper catching up", 0)
	if err := benchstat.Until(ctx, 5*time.Millisecond, func() (bool, error) { return svc.CaughtUp(ctx) }); err != nil {
		return Result{}, err
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
		l := Latencies{Count: n, Latencies: benchstat.Summarize(times), Matches: float64(matches) / float64(n),
			CPU: benchstat.ReadCPU(ctx, rdb).PerItem(cpu, n)}
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
