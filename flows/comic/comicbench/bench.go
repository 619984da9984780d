// Package comicbench measures the comic flow: it loads subscriptions
// spread over realistic SearchPatterns (see world.go for the
// distribution), then measures matching latency (index lookups, and
// lookups plus loading the subscribers, delivery not included), intake
// throughput (the atomic inventory + job script), and the matcher stage's
// throughput over the intake backlog. The notification requests the
// matcher hands off are consumed by a discarding group and trimmed as they
// are acknowledged, and Redis memory is watched throughout: a run stops
// when used_memory passes Config.MaxRedisMemory.
package comicbench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/flows/comic"
	"github.com/dropstream/dropstream/stream"
)

// Config configures a bench run. Zero fields take their defaults.
type Config struct {
	// Subscriptions to load. Default 1,000,000.
	Subscriptions int
	// LoadWorkers load subscriptions concurrently, each a pipeline of
	// scripts. Default 4.
	LoadWorkers int
	// Matches is the number of comics matched for the latency figures.
	// Default 5,000.
	Matches int
	// Intake is the number of comics listed for the throughput figure.
	// Default 50,000.
	Intake int
	// Workers are the concurrent intake callers. Default 16.
	Workers int
	// IntakeBatch is the number of comics one intake call lists in one
	// pipeline (Inventory.AddMany); 1 calls Inventory.Add per comic, as
	// POST /v1/comics does. Default 1.
	IntakeBatch int
	// Partitions of the flow. Default 8.
	Partitions int
	// Seed makes the data reproducible. Default 1.
	Seed uint64
	// Reuse measures over the subscriptions already loaded (by an earlier
	// run) instead of loading new ones.
	Reuse bool
	// MaxRedisMemory stops the run (with an error) when Redis used_memory
	// passes it. Default 4 GiB.
	MaxRedisMemory int64
	// Progress, when set, receives progress lines.
	Progress func(string)
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.Subscriptions == 0 {
		c.Subscriptions = 1_000_000
	}
	if c.LoadWorkers == 0 {
		c.LoadWorkers = 4
	}
	if c.Matches == 0 {
		c.Matches = 5000
	}
	if c.Intake == 0 {
		c.Intake = 50_000
	}
	if c.Workers == 0 {
		c.Workers = 16
	}
	if c.IntakeBatch == 0 {
		c.IntakeBatch = 1
	}
	if c.Partitions == 0 {
		c.Partitions = 8
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.MaxRedisMemory == 0 {
		c.MaxRedisMemory = 4 << 30
	}
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c Config) Validate() error {
	if c.Subscriptions < 1 || c.LoadWorkers < 1 || c.Matches < 1 || c.Intake < 1 || c.Workers < 1 || c.IntakeBatch < 1 ||
		c.Partitions < 1 || c.MaxRedisMemory < 1 {
		return errors.New("comicbench: subscriptions, load workers, matches, intake, workers, intake batch, partitions and max redis memory must be positive")
	}
	return nil
}

// ErrMemory: Redis used_memory passed Config.MaxRedisMemory; the run was
// stopped.
var ErrMemory = errors.New("comicbench: redis memory limit passed")

// Result are the measured figures.
type Result struct {
	Subscriptions int
	Load          time.Duration
	ActivePattern int
	// Lookup is MatchIDs (index lookups only); Match adds loading the
	// matched subscriptions and keeping one per email.
	LookupP50, LookupP99, MatchP50, MatchP99, MatchMax time.Duration
	// Matched is the distribution of subscribers (distinct emails) per
	// matched comic.
	MeanMatched                                    float64
	MatchedP50, MatchedP90, MatchedP99, MaxMatched int
	IntakePerSecond                                float64
	MatcherPerSecond                               float64
	// Handed is the number of notification requests the matcher stage
	// handed off; NotifyPeak the longest the notify streams got (summed
	// over partitions) while the discarding group consumed them.
	Handed, NotifyPeak int64
	// RedisMemory is used_memory after loading and at the end; PeakMemory
	// the highest seen by the watch.
	RedisMemoryLoaded, RedisMemory, PeakMemory int64
}

// Run loads the subscriptions into rdb (which must hold no comic
// subscriptions unless Reuse) and measures.
func Run(ctx context.Context, rdb redis.UniversalClient, cfg Config) (Result, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	progress := func(f string, a ...any) {
		if cfg.Progress != nil {
			cfg.Progress(fmt.Sprintf(f, a...))
		}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	watch := &memWatch{rdb: rdb, limit: cfg.MaxRedisMemory}
	stopWatch := watch.start(ctx, cancel)
	defer stopWatch()
	res, err := run(ctx, rdb, cfg, progress)
	if cause := context.Cause(ctx); errors.Is(cause, ErrMemory) {
		err = cause
	}
	res.PeakMemory = watch.peak.Load()
	return res, err
}

func run(ctx context.Context, rdb redis.UniversalClient, cfg Config, progress func(string, ...any)) (Result, error) {
	svc, err := comic.New(rdb, comic.Config{Partitions: cfg.Partitions}, nil, stream.Telemetry{})
	if err != nil {
		return Result{}, err
	}
	var res Result
	loaded, err := svc.Subscriptions.Stats(ctx)
	if err != nil || (loaded.Subscriptions > 0 && !cfg.Reuse) {
		return Result{}, fmt.Errorf("comicbench: the database must hold no comic subscriptions (%d, %v)", loaded.Subscriptions, err)
	}
	w := newWorld(cfg.Seed)
	began := time.Now()
	if cfg.Reuse {
		res.Subscriptions = int(loaded.Subscriptions)
		// Draw the same number of subscriptions as a load would, so the
		// comics measured are the same as after a load.
		for i := range res.Subscriptions {
			w.subscription(i)
		}
	} else if res.Subscriptions, err = load(ctx, svc.Subscriptions, w, cfg, progress); err != nil {
		return Result{}, err
	}
	res.Load = time.Since(began)
	st, err := svc.Subscriptions.Stats(ctx)
	if err != nil {
		return Result{}, err
	}
	res.ActivePattern = len(st.Patterns)
	res.RedisMemoryLoaded = usedMemory(ctx, rdb)
	progress("%d subscriptions over %d patterns (loaded in %s); redis used_memory %d MB",
		res.Subscriptions, res.ActivePattern, res.Load.Round(time.Millisecond), res.RedisMemoryLoaded>>20)

	if err := measureMatch(ctx, svc, w, cfg, &res, progress); err != nil {
		return Result{}, err
	}
	if err := measureIntake(ctx, svc, w, cfg, &res, progress); err != nil {
		return Result{}, err
	}
	if err := measureMatcher(ctx, rdb, svc, cfg, &res, progress); err != nil {
		return Result{}, err
	}
	res.RedisMemory = usedMemory(ctx, rdb)
	return res, nil
}

// load creates cfg.Subscriptions subscriptions with LoadWorkers pipelines.
func load(ctx context.Context, store *comic.Store, w *world, cfg Config, progress func(string, ...any)) (int, error) {
	const batch = 5000
	batches := make(chan []comic.NewSubscription, cfg.LoadWorkers)
	var created, done atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, cfg.LoadWorkers)
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range cfg.LoadWorkers {
		wg.Go(func() {
			for subs := range batches {
				n, err := store.CreateMany(lctx, subs)
				if err != nil {
					errs <- err
					cancel()
					return
				}
				created.Add(int64(n))
				done.Add(int64(len(subs)))
			}
		})
	}
	began, last := time.Now(), time.Now()
	for start := 0; start < cfg.Subscriptions && lctx.Err() == nil; start += batch {
		subs := make([]comic.NewSubscription, 0, batch)
		for i := start; i < min(start+batch, cfg.Subscriptions); i++ {
			subs = append(subs, w.subscription(i))
		}
		select {
		case batches <- subs:
		case <-lctx.Done():
		}
		if time.Since(last) >= 5*time.Second {
			last = time.Now()
			n := done.Load()
			progress("loading: %d of %d subscriptions, %.0f/s", n, cfg.Subscriptions, float64(n)/time.Since(began).Seconds())
		}
	}
	close(batches)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return int(created.Load()), nil
}

// measureMatch times MatchIDs and Match on cfg.Matches comics.
func measureMatch(ctx context.Context, svc *comic.Service, w *world, cfg Config, res *Result, progress func(string, ...any)) error {
	lookups := make([]time.Duration, 0, cfg.Matches)
	matches := make([]time.Duration, 0, cfg.Matches)
	matched := make([]int, 0, cfg.Matches)
	total := 0
	for i := range cfg.Matches {
		c := w.comic()
		t0 := time.Now()
		if _, err := svc.Matcher.MatchIDs(ctx, c); err != nil {
			return err
		}
		lookups = append(lookups, time.Since(t0))
		t1 := time.Now()
		reqs, err := svc.Matcher.Match(ctx, c, comic.Job{ComicID: c.ID(), Gen: 1})
		if err != nil {
			return err
		}
		matches = append(matches, time.Since(t1))
		matched = append(matched, len(reqs))
		total += len(reqs)
		if i%1000 == 999 {
			progress("matched %d comics", i+1)
		}
	}
	res.MeanMatched = float64(total) / float64(cfg.Matches)
	slices.Sort(lookups)
	slices.Sort(matches)
	slices.Sort(matched)
	res.LookupP50, res.LookupP99 = pct(lookups, 0.50), pct(lookups, 0.99)
	res.MatchP50, res.MatchP99, res.MatchMax = pct(matches, 0.50), pct(matches, 0.99), matches[len(matches)-1]
	res.MatchedP50, res.MatchedP90, res.MatchedP99 = pct(matched, 0.50), pct(matched, 0.90), pct(matched, 0.99)
	res.MaxMatched = matched[len(matched)-1]
	progress("lookups p50 %s p99 %s; match p50 %s p99 %s max %s; subscribers per comic: mean %.1f, p50 %d, p90 %d, p99 %d, max %d",
		res.LookupP50, res.LookupP99, res.MatchP50, res.MatchP99, res.MatchMax, res.MeanMatched,
		res.MatchedP50, res.MatchedP90, res.MatchedP99, res.MaxMatched)
	return nil
}

// measureIntake lists cfg.Intake new comics with cfg.Workers callers.
func measureIntake(ctx context.Context, svc *comic.Service, w *world, cfg Config, res *Result, progress func(string, ...any)) error {
	comics := make([]comic.Comic, cfg.Intake)
	stamp := strconv.FormatInt(time.Now().UnixNano(), 36)
	for i := range comics {
		comics[i] = w.comic()
		comics[i].Title = "Intake " + stamp + " " + strconv.Itoa(i) // distinct identities
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, cfg.Workers)
	began := time.Now()
	for range cfg.Workers {
		wg.Go(func() {
			for {
				i := int(next.Add(int64(cfg.IntakeBatch))) - cfg.IntakeBatch
				if i >= len(comics) {
					return
				}
				var err error
				if cfg.IntakeBatch == 1 {
					_, _, err = svc.Inventory.Add(ctx, comics[i])
				} else {
					_, err = svc.Inventory.AddMany(ctx, comics[i:min(i+cfg.IntakeBatch, len(comics))])
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	res.IntakePerSecond = float64(cfg.Intake) / time.Since(began).Seconds()
	progress("listed %d comics at %.0f/s", cfg.Intake, res.IntakePerSecond)
	return nil
}

func pct[T any](sorted []T, q float64) T {
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}
