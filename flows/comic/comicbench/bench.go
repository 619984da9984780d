// Package comicbench measures the comic flow: it loads subscriptions
// spread over realistic SearchPatterns, then measures matching latency
// (index lookups, and lookups plus loading the subscribers, delivery not
// included), intake throughput (the atomic inventory + job script), and
// the matcher stage's throughput over the intake backlog.
package comicbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
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
	// Matches is the number of comics matched for the latency figures.
	// Default 5,000.
	Matches int
	// Intake is the number of comics listed for the throughput figure.
	// Default 50,000.
	Intake int
	// Workers are the concurrent intake callers. Default 16.
	Workers int
	// Partitions of the flow. Default 8.
	Partitions int
	// Seed makes the data reproducible. Default 1.
	Seed uint64
	// Reuse measures over the subscriptions already loaded (by an earlier
	// run) instead of loading new ones.
	Reuse bool
	// Progress, when set, receives progress lines.
	Progress func(string)
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.Subscriptions == 0 {
		c.Subscriptions = 1_000_000
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
	if c.Partitions == 0 {
		c.Partitions = 8
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c Config) Validate() error {
	if c.Subscriptions < 1 || c.Matches < 1 || c.Intake < 1 || c.Workers < 1 || c.Partitions < 1 {
		return errors.New("comicbench: subscriptions, matches, intake, workers and partitions must be positive")
	}
	return nil
}

// Result are the measured figures.
type Result struct {
	Subscriptions int
	Load          time.Duration
	ActivePattern int
	// Lookup is MatchIDs (index lookups only); Match adds loading the
	// matched subscriptions and keeping one per email.
	LookupP50, LookupP99, MatchP50, MatchP99, MatchMax time.Duration
	MeanMatched                                        float64
	MaxMatched                                         int
	IntakePerSecond                                    float64
	MatcherPerSecond                                   float64
	RedisMemory                                        int64
}

// patternMix is the share of subscriptions per SearchPattern: collectors
// mostly want a given series or a given issue of it.
var patternMix = []struct {
	fields []string
	share  float64
}{
	{[]string{"issue", "series"}, 0.35},
	{[]string{"series"}, 0.15},
	{[]string{"issue", "publisher", "series"}, 0.10},
	{[]string{"grade", "issue", "series"}, 0.10},
	{[]string{"key_issue", "series"}, 0.08},
	{[]string{"issue", "key_issue", "series"}, 0.05},
	{[]string{"series", "year"}, 0.05},
	{[]string{"publisher", "series"}, 0.05},
	{[]string{"issue", "series", "variant"}, 0.04},
	{[]string{"key_issue", "publisher"}, 0.005},
	{[]string{"grade", "key_issue", "publisher"}, 0.0039},
	{[]string{"publisher"}, 0.001},
	{nil, 0.0001},
}

var publishers = []string{"Marvel", "DC", "Image", "Dark Horse", "IDW", "Boom!", "Dynamite", "Valiant"}
var publisherWeights = []float64{0.35, 0.30, 0.10, 0.08, 0.06, 0.05, 0.04, 0.02}

// world draws comics and subscription values from one distribution:
// 5,000 series (40% of the interest on the top 100), issues 1..300 (half
// on 1..20), CGC grades, years 1960..2024.
type world struct{ r *rand.Rand }

func (w world) pick(weights []float64) int {
	total := 0.0
	for _, p := range weights {
		total += p
	}
	x := w.r.Float64() * total
	for i, p := range weights {
		if x < p {
			return i
		}
		x -= p
	}
	return len(weights) - 1
}

func (w world) comic() comic.Comic {
	s := w.r.IntN(5000)
	if w.r.Float64() < 0.4 {
		s = w.r.IntN(100)
	}
	issue := 1 + w.r.IntN(300)
	if w.r.Float64() < 0.5 {
		issue = 1 + w.r.IntN(20)
	}
	variant := ""
	if w.r.Float64() < 0.2 {
		variant = "Variant " + strconv.Itoa(1+w.r.IntN(5))
	}
	return comic.Comic{Grade: comic.CGCGrades[w.r.IntN(len(comic.CGCGrades))], Issue: strconv.Itoa(issue),
		KeyIssue: w.r.Float64() < 0.1, PriceCents: int64(1000 + w.r.IntN(1_000_000)), Printing: int64(1 + w.r.IntN(3)),
		Publisher: publishers[w.pick(publisherWeights)], Series: "Series " + strconv.Itoa(s),
		Title: "Title " + strconv.Itoa(w.r.IntN(100000)), Variant: variant, Year: int64(1960 + w.r.IntN(65))}
}

// Run loads the subscriptions into rdb (which must hold no comic
// subscriptions) and measures.
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
	svc, err := comic.New(rdb, comic.Config{Partitions: cfg.Partitions}, nil, stream.Telemetry{})
	if err != nil {
		return Result{}, err
	}
	var res Result
	loaded, err := svc.Subscriptions.Stats(ctx)
	if err != nil || (loaded.Subscriptions > 0 && !cfg.Reuse) {
		return Result{}, fmt.Errorf("comicbench: the database must hold no comic subscriptions (%d, %v)", loaded.Subscriptions, err)
	}
	if cfg.Reuse {
		cfg.Subscriptions = 0
		res.Subscriptions = int(loaded.Subscriptions)
	}
	w := world{rand.New(rand.NewPCG(cfg.Seed, 2))}
	shares := make([]float64, len(patternMix))
	for i, p := range patternMix {
		shares[i] = p.share
	}
	began := time.Now()
	const batch = 5000
	for done := 0; done < cfg.Subscriptions; done += batch {
		subs := make([]comic.NewSubscription, 0, batch)
		for i := done; i < min(done+batch, cfg.Subscriptions); i++ {
			full := w.comic().Body()
			body := comic.Body{}
			for _, f := range patternMix[w.pick(shares)].fields {
				body[f] = full[f]
			}
			subs = append(subs, comic.NewSubscription{Email: "c" + strconv.Itoa(i/3) + "@example.com", Body: body.Canonical()})
		}
		n, err := svc.Subscriptions.CreateMany(ctx, subs)
		if err != nil {
			return Result{}, err
		}
		res.Subscriptions += n
		if (done/batch)%20 == 0 {
			progress("loaded %d subscriptions", done+len(subs))
		}
	}
	res.Load = time.Since(began)
	st, err := svc.Subscriptions.Stats(ctx)
	if err != nil {
		return Result{}, err
	}
	res.ActivePattern = len(st.Patterns)
	progress("loaded %d subscriptions over %d patterns in %s", res.Subscriptions, res.ActivePattern, res.Load.Round(time.Millisecond))

	lookups := make([]time.Duration, 0, cfg.Matches)
	matches := make([]time.Duration, 0, cfg.Matches)
	total := 0
	for i := range cfg.Matches {
		c := w.comic()
		t0 := time.Now()
		if _, err := svc.Matcher.MatchIDs(ctx, c); err != nil {
			return Result{}, err
		}
		lookups = append(lookups, time.Since(t0))
		t1 := time.Now()
		reqs, err := svc.Matcher.Match(ctx, c, comic.Job{ComicID: c.ID(), Gen: 1})
		if err != nil {
			return Result{}, err
		}
		matches = append(matches, time.Since(t1))
		total += len(reqs)
		res.MaxMatched = max(res.MaxMatched, len(reqs))
		if i%1000 == 999 {
			progress("matched %d comics", i+1)
		}
	}
	res.MeanMatched = float64(total) / float64(cfg.Matches)
	slices.Sort(lookups)
	slices.Sort(matches)
	res.LookupP50, res.LookupP99 = pct(lookups, 0.50), pct(lookups, 0.99)
	res.MatchP50, res.MatchP99, res.MatchMax = pct(matches, 0.50), pct(matches, 0.99), matches[len(matches)-1]
	progress("lookups p50 %s p99 %s; match p50 %s p99 %s max %s; %.1f subscribers per comic, %d at most",
		res.LookupP50, res.LookupP99, res.MatchP50, res.MatchP99, res.MatchMax, res.MeanMatched, res.MaxMatched)

	comics := make([]comic.Comic, cfg.Intake)
	for i := range comics {
		comics[i] = w.comic()
		comics[i].Title = "Intake " + strconv.FormatInt(began.UnixNano(), 36) + " " + strconv.Itoa(i) // distinct identities
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, cfg.Workers)
	began = time.Now()
	for range cfg.Workers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(len(comics)) {
					return
				}
				if _, _, err := svc.Inventory.Add(ctx, comics[i]); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return Result{}, err
	}
	res.IntakePerSecond = float64(cfg.Intake) / time.Since(began).Seconds()
	progress("listed %d comics at %.0f/s", cfg.Intake, res.IntakePerSecond)

	// The matcher stage over the intake backlog, handing off to a stream.
	mctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stage := svc.Matcher.Stage()
	stage.Config = stream.RunnerConfig{BatchSize: 500, Block: 50 * time.Millisecond}
	runner, err := stream.NewRunner(rdb, stage, stream.Telemetry{})
	if err != nil {
		return Result{}, err
	}
	began = time.Now()
	stopped := make(chan struct{})
	go func() { _ = runner.Run(mctx); close(stopped) }()
	for {
		lag, err := backlog(ctx, rdb, svc.Topics.Jobs, stage.Name)
		if err != nil {
			return Result{}, err
		}
		if lag == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	res.MatcherPerSecond = float64(cfg.Intake) / time.Since(began).Seconds()
	cancel()
	<-stopped
	if info, err := rdb.Info(ctx, "memory").Result(); err == nil {
		res.RedisMemory = parseUsedMemory(info)
	}
	return res, nil
}

// backlog is what group has not yet acknowledged on topic (its lag plus
// its pending entries).
func backlog(ctx context.Context, rdb redis.UniversalClient, topic stream.Topic, group string) (int64, error) {
	var n int64
	for p := 0; p < topic.Partitions; p++ {
		groups, err := rdb.XInfoGroups(ctx, topic.Stream(p)).Result()
		if err != nil {
			return 0, err
		}
		info, err := rdb.XInfoStream(ctx, topic.Stream(p)).Result()
		if err != nil {
			return 0, err
		}
		for _, g := range groups {
			if g.Name != group {
				continue
			}
			n += g.Pending
			if g.LastDeliveredID != info.LastGeneratedID {
				n += max(1, g.Lag)
			}
		}
	}
	return n, nil
}

func pct(sorted []time.Duration, q float64) time.Duration {
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

func parseUsedMemory(info string) int64 {
	const key = "used_memory:"
	for i := 0; i+len(key) < len(info); i++ {
		if info[i:i+len(key)] == key {
			j := i + len(key)
			k := j
			for k < len(info) && info[k] >= '0' && info[k] <= '9' {
				k++
			}
			n, _ := strconv.ParseInt(info[j:k], 10, 64)
			return n
		}
	}
	return 0
}

// Summary formats the result as report lines.
func (r Result) Summary() string {
	b, _ := json.MarshalIndent(r, "", "  ")
	return string(b)
}
