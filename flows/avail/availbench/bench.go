package availbench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"runtime"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/avail/availjson"
	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/diff"
	"github.com/dropstream/dropstream/flows/avail/watch"
	"github.com/dropstream/dropstream/internal/benchstat"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer"
)

// pollEvery and pollClickHouse are how often completion is checked in
// Redis and ClickHouse; they bound the error of the measured times.
const (
	pollEvery      = 10 * time.Millisecond
	pollClickHouse = 100 * time.Millisecond
)

// stageBlock is the stages' XREADGROUP BLOCK, bounding how long stopping takes.
const stageBlock = 100 * time.Millisecond

// Harness is one bench's state. Its phases run in order: Setup, Diff,
// Analytics, Latency. It is not safe for concurrent use.
type Harness struct {
	cfg      Config
	rdb      redis.UniversalClient
	ch       *clickhouse.Client // nil without a DSN
	admin    *clickhouse.Client
	db       string
	topics   avail.Topics
	fleet    *fleet
	pub      *stream.Publisher
	log      *slog.Logger
	baseMem  int64
	setupRun bool
	cursor   int // next scope to run
	// runs counts snapshots since Setup: the run ids the runs table will hold.
	runs int64
}

// Open checks cfg and that rdb's database is empty, and creates and
// migrates the bench's ClickHouse database if ClickHouseDSN is set. Call Close.
func Open(ctx context.Context, rdb redis.UniversalClient, cfg Config) (*Harness, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := benchstat.CheckEmpty(ctx, rdb, "availbench"); err != nil {
		return nil, err
	}
	log := cfg.Telemetry.Logger
	if log == nil {
		log = slog.Default()
	}
	b := &Harness{cfg: cfg, rdb: rdb, topics: avail.NewTopics(cfg.Partitions),
		fleet: newFleet(cfg.Scopes, cfg.PerScope, cfg.churned()), pub: stream.NewPublisher(rdb, cfg.Telemetry), log: log}
	if b.baseMem = benchstat.UsedMemory(ctx, rdb); b.baseMem == 0 {
		return nil, errors.New("availbench: no used_memory in INFO memory")
	}
	if cfg.ClickHouseDSN != "" {
		if err := b.openClickHouse(ctx); err != nil {
			_ = b.Close()
			return nil, err
		}
	}
	return b, nil
}

// openClickHouse creates and migrates dsbench_<hex> on the DSN's server.
func (b *Harness) openClickHouse(ctx context.Context) error {
	u, err := url.Parse(b.cfg.ClickHouseDSN)
	if err != nil {
		return fmt.Errorf("availbench: clickhouse dsn: %w", err)
	}
	if b.admin, err = clickhouse.Open(ctx, clickhouse.Config{DSN: b.cfg.ClickHouseDSN}); err != nil {
		return err
	}
	name := fmt.Sprintf("dsbench_%012x", rand.Uint64()>>16)
	if err := b.admin.Conn().Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return fmt.Errorf("availbench: create database %s: %w", name, err)
	}
	b.db = name
	u.Path = "/" + name
	// Every partition of both analytics stages may insert at once.
	conns := 3*b.cfg.Partitions*b.cfg.AnalyticsCopies + 2
	if b.ch, err = clickhouse.Open(ctx, clickhouse.Config{DSN: u.String(), MaxOpenConns: conns}); err != nil {
		return err
	}
	if _, err := clickhouse.Migrate(ctx, b.ch, nil); err != nil {
		return fmt.Errorf("availbench: migrate %s: %w", name, err)
	}
	b.cfg.Phases.Printf("clickhouse database %s created and migrated", name)
	return nil
}

// Close empties Redis and drops the ClickHouse database (unless Keep) and
// closes the ClickHouse clients, not rdb.
func (b *Harness) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	if !b.cfg.Keep {
		errs = append(errs, benchstat.FlushDB(ctx, b.rdb))
	}
	if b.ch != nil {
		errs = append(errs, b.ch.Close())
	}
	if b.admin != nil {
		if b.db != "" && !b.cfg.Keep {
			errs = append(errs, b.admin.Conn().Exec(ctx, "DROP DATABASE IF EXISTS "+b.db))
		}
		errs = append(errs, b.admin.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("availbench: close: %w", err)
	}
	return nil
}

// Database is the bench's ClickHouse database ("" without a DSN).
func (b *Harness) Database() string { return b.db }

// Entities is the number of entities observed per run of every scope.
func (b *Harness) Entities() int { return b.cfg.Scopes * b.cfg.PerScope }

// Setup applies the baseline and stabilization runs through the diff,
// measuring Redis memory per entity, then creates the later stages' groups.
func (b *Harness) Setup(ctx context.Context) (baseline, stabilization Rate, afterBaseline, steady Memory, err error) {
	if b.setupRun {
		return Rate{}, Rate{}, Memory{}, Memory{}, errors.New("availbench: Setup runs once")
	}
	b.setupRun = true
	steps := []struct {
		name string
		rate *Rate
		mem  *Memory
	}{{"baseline run", &baseline, &afterBaseline}, {"stabilization run", &stabilization, &steady}}
	for _, s := range steps {
		if *s.rate, err = b.diffRound(ctx, s.name, b.cfg.Scopes); err != nil {
			return
		}
		if err = b.trim(ctx); err != nil {
			return
		}
		*s.mem = Memory{Bytes: benchstat.UsedMemory(ctx, b.rdb) - b.baseMem, Entities: b.Entities()}
		b.cfg.Phases.Printf("%s: redis used_memory +%d bytes = %.1f bytes per entity", s.name, s.mem.Bytes, s.mem.PerEntity())
	}
	for _, g := range []struct {
		topic stream.Topic
		group string
	}{{b.topics.Transitions, writer.StageAnalyticsTransitions}, {b.topics.Runs, writer.StageAnalyticsRuns},
		{b.topics.Transitions, writer.StageProjection}, {b.topics.Transitions, watch.StageNotifier}} {
		if err = stream.EnsureGroups(ctx, b.rdb, g.topic, g.group); err != nil {
			return
		}
	}
	return
}

// Diff applies runs churn runs of every scope and returns the observations
// and the time the diff stage took.
func (b *Harness) Diff(ctx context.Context, runs int) (Rate, error) {
	var total Rate
	for r := 1; r <= runs; r++ {
		rate, err := b.diffRound(ctx, fmt.Sprintf("churn run %d/%d", r, runs), b.cfg.Scopes)
		b.runs += int64(b.cfg.Scopes)
		if err != nil {
			return total, err
		}
		total.Count += rate.Count
		total.Elapsed += rate.Elapsed
		total.CPU = total.CPU.Plus(rate.CPU)
	}
	return total, nil
}

// diffRound publishes the next snapshot of n scopes and runs the diff
// until its group has acknowledged every snapshot (run records are not
// counted: a repeat appends a second one).
func (b *Harness) diffRound(ctx context.Context, name string, n int) (Rate, error) {
	pubStart := time.Now()
	msgs := make([]*stream.Message, 0, 500)
	for i := 0; i < n; i++ {
		s := b.nextScope()
		m, err := message(b.fleet.next(s, time.Now()))
		if err != nil {
			return Rate{}, err
		}
		if msgs = append(msgs, m); len(msgs) == cap(msgs) || i == n-1 {
			if err := b.pub.Publish(ctx, b.topics.Snapshots, msgs...); err != nil {
				return Rate{}, err
			}
			msgs = msgs[:0]
		}
	}
	b.cfg.Phases.Printf("%s: %d snapshots published in %s", name, n, time.Since(pubStart).Round(time.Millisecond))
	stage := diff.NewStage(b.rdb, b.topics, b.cfg.Telemetry)
	stage.Config.Block = stageBlock
	stage.Config.BatchSize = b.cfg.DiffBatch
	start, cpu := time.Now(), benchstat.ReadCPU(ctx, b.rdb)
	stop, err := b.run(ctx, b.cfg.DiffCopies, stage)
	if err != nil {
		return Rate{}, err
	}
	defer stop()
	err = b.drain(ctx, name+": handled", b.topics.Snapshots, diff.StageName)
	elapsed := time.Since(start)
	if err != nil {
		return Rate{}, err
	}
	r := Rate{Count: int64(n * b.cfg.PerScope), Elapsed: elapsed}
	r.CPU = benchstat.ReadCPU(ctx, b.rdb).PerItem(cpu, 1)
	b.cfg.Phases.Printf("%s: %d observations applied in %s = %.0f observations/s", name, r.Count,
		elapsed.Round(time.Millisecond), r.PerSecond())
	return r, nil
}

// nextScope returns the scopes round robin.
func (b *Harness) nextScope() int {
	s := b.cursor
	b.cursor = (b.cursor + 1) % b.cfg.Scopes
	return s
}

// Analytics runs the analytics stages on the backlog since Setup and
// returns the transitions and the time until ClickHouse counted them all.
func (b *Harness) Analytics(ctx context.Context) (Rate, error) {
	if b.ch == nil {
		return Rate{}, errors.New("availbench: Analytics needs a ClickHouse DSN")
	}
	want, err := b.countTransitions(ctx)
	if err != nil {
		return Rate{}, err
	}
	// Not the run stream's length: a replayed snapshot appends a second record.
	wantRuns := b.runs
	a, err := writer.NewAnalytics(b.ch, writer.AnalyticsConfig{Partitions: b.cfg.Partitions,
		Runner: stream.RunnerConfig{Block: stageBlock}}, b.cfg.Telemetry)
	if err != nil {
		return Rate{}, err
	}
	defer func() { _ = a.Close() }()
	b.cfg.Phases.Printf("analytics: backlog of %d transitions and %d run records", want, wantRuns)
	runtime.GC() // counting left garbage; the stages start on a clean heap
	start, cpu := time.Now(), benchstat.ReadCPU(ctx, b.rdb)
	stop, err := b.run(ctx, b.cfg.AnalyticsCopies, a.Stages()...)
	if err != nil {
		return Rate{}, err
	}
	defer stop()
	// Exact counts cost ClickHouse CPU: poll the parts' row counts, then
	// count exactly once they reach want.
	var countedAt time.Time
	count := func(table string, want int64, f func(context.Context, *clickhouse.Client, clickhouse.Filter) (uint64, error)) func() (int64, error) {
		return func() (int64, error) {
			var rows uint64
			q := "SELECT sum(rows) FROM system.parts WHERE active AND database = currentDatabase() AND table = '" + table + "'"
			if err := b.ch.Conn().QueryRow(ctx, q).Scan(&rows); err != nil || int64(rows) < want {
				return int64(rows), err
			}
			at := time.Now()
			n, err := f(ctx, b.ch, clickhouse.Filter{})
			if err == nil && int64(n) >= want {
				countedAt = at
			}
			return int64(n), err
		}
	}
	if err := b.await(ctx, "analytics: transitions in clickhouse", pollClickHouse, want, count(clickhouse.TableTransitions, want, clickhouse.CountTransitions)); err != nil {
		return Rate{}, err
	}
	r := Rate{Count: want, Elapsed: countedAt.Sub(start)}
	r.CPU = benchstat.ReadCPU(ctx, b.rdb).PerItem(cpu, 1)
	b.cfg.Phases.Printf("analytics: %d transitions in clickhouse in %s = %.0f transitions/s", want,
		r.Elapsed.Round(time.Millisecond), r.PerSecond())
	if err := b.await(ctx, "analytics: runs in clickhouse", pollClickHouse, wantRuns, count(clickhouse.TableRuns, wantRuns, clickhouse.CountRuns)); err != nil {
		return r, err
	}
	return r, nil
}

// await polls count until it reaches want, every interval, every pollEvery
// from nine tenths of want on; a count that fails is logged and retried.
func (b *Harness) await(ctx context.Context, what string, every time.Duration, want int64, count func() (int64, error)) error {
	ph := b.cfg.Phases.Start(what, want)
	var n int64
	var last time.Time
	err := benchstat.Until(ctx, pollEvery, func() (bool, error) {
		if n < want-want/10 && time.Since(last) < every {
			return false, nil
		}
		last = time.Now()
		var err error
		if n, err = count(); err != nil {
			b.log.Warn("availbench: count failed; retrying", "what", what, "error", err)
		}
		ph.Set(n)
		return n >= want, nil
	})
	if err != nil {
		return fmt.Errorf("availbench: %s: %d of %d: %w", what, n, want, err)
	}
	ph.Done("")
	return nil
}

// run starts copies of each stage; stop cancels them and waits.
func (b *Harness) run(ctx context.Context, copies int, stages ...stream.Stage) (stop func(), err error) {
	tel := b.cfg.Telemetry
	tel.Logger = b.log
	return stream.RunStages(ctx, b.rdb, tel, copies, stages...)
}

// countTransitions counts the transitions in the transition topic's entries.
func (b *Harness) countTransitions(ctx context.Context) (int64, error) {
	var n int64
	err := b.eachTransition(ctx, func(avail.Transition) { n++ })
	return n, err
}

// eachTransition calls fn on every transition, partition by partition.
func (b *Harness) eachTransition(ctx context.Context, fn func(avail.Transition)) error {
	for p := range b.topics.Transitions.Partitions {
		start := "-"
		for {
			xs, err := b.rdb.XRangeN(ctx, b.topics.Transitions.Stream(p), start, "+", 1000).Result()
			if err != nil {
				return fmt.Errorf("availbench: read transitions: %w", err)
			}
			for _, x := range xs {
				typ, _ := x.Values["type"].(string)
				payload, _ := x.Values["payload"].(string)
				ts, err := availjson.DecodeTransitions(typ, []byte(payload))
				if err != nil {
					return fmt.Errorf("availbench: transitions of %s: %w", x.ID, err)
				}
				for _, t := range ts {
					fn(t)
				}
			}
			if len(xs) < 1000 {
				break
			}
			start = "(" + xs[len(xs)-1].ID
		}
	}
	return nil
}

// drain waits until groups have handled every entry of topic.
func (b *Harness) drain(ctx context.Context, what string, topic stream.Topic, groups ...string) error {
	first, err := stream.Unhandled(ctx, b.rdb, topic, groups...)
	if err != nil {
		return err
	}
	return b.await(ctx, what, pollEvery, first, func() (int64, error) {
		n, err := stream.Unhandled(ctx, b.rdb, topic, groups...)
		if err != nil {
			return 0, err // not done: unhandled is 0 on an error
		}
		return first - n, nil
	})
}

// trim empties the snapshot, transition and run streams (all acknowledged).
func (b *Harness) trim(ctx context.Context) error {
	pipe := b.rdb.Pipeline()
	for _, t := range []stream.Topic{b.topics.Snapshots, b.topics.Transitions, b.topics.Runs} {
		for p := range t.Partitions {
			pipe.XTrimMaxLen(ctx, t.Stream(p), 0)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("availbench: trim: %w", err)
	}
	return nil
}
