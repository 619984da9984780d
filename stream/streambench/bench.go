// Package streambench measures the stream runtime on a real Redis: one
// trivial stage's throughput, and per-hop latency at a fixed publish rate.
package streambench

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/benchstat"
	"github.com/dropstream/dropstream/internal/progress"
	"github.com/dropstream/dropstream/stream"
)

// Config describes one run. Zero fields take their defaults.
type Config struct {
	// Messages is the number of messages of a throughput run. Default 200000.
	Messages int
	// Partitions of the benchmark topic. Default 4.
	Partitions int
	// BatchSize is plain go-redis's XREADGROUP COUNT and the stage's most.
	// Default 500.
	BatchSize int
	// ReadBytes is the stage's ReadBytes. Default stream.DefaultReadBytes.
	ReadBytes int
	// PayloadSize is the payload length in bytes. Default 200.
	PayloadSize int
	// Rate is the publish rate of a latency run, in messages/s. Default 10000.
	Rate int
	// Duration of a latency run. Default 10s.
	Duration time.Duration
	// Telemetry instruments the stage.
	Telemetry stream.Telemetry
	// PublishTelemetry, when set, instruments the publisher instead: a traced
	// publisher and a stage without telemetry cost what carrying context does.
	PublishTelemetry *stream.Telemetry
	// Progress, when set, shows each phase with its counts.
	Progress *progress.Printer
}

// Validate checks a defaulted config.
func (c Config) Validate() error {
	if c.Messages < 1 || c.Partitions < 1 || c.BatchSize < 1 || c.PayloadSize < 8 || c.Rate < 1 || c.Duration <= 0 {
		return fmt.Errorf("streambench: invalid config %+v", c)
	}
	return nil
}

func (c Config) publishTelemetry() stream.Telemetry {
	if c.PublishTelemetry != nil {
		return *c.PublishTelemetry
	}
	return c.Telemetry
}

// WithDefaults fills zero fields.
func (c Config) WithDefaults() Config {
	c.Messages = cmp.Or(c.Messages, 200000)
	c.Partitions = cmp.Or(c.Partitions, 4)
	c.BatchSize = cmp.Or(c.BatchSize, 500)
	c.ReadBytes = cmp.Or(c.ReadBytes, stream.DefaultReadBytes)
	c.PayloadSize = cmp.Or(c.PayloadSize, 200)
	c.Rate = cmp.Or(c.Rate, 10000)
	c.Duration = cmp.Or(c.Duration, 10*time.Second)
	return c
}

// Result is what a run measured.
type Result struct {
	Messages   int
	Elapsed    time.Duration
	PerSecond  float64
	P50, P99   time.Duration
	Max        time.Duration
	Duplicates int
	// CPUPerMessage is this process's CPU per message consumed, publishing
	// excluded: steadier than PerSecond on a loaded machine.
	CPUPerMessage time.Duration
	// RedisCPUPerMessage is Redis's CPU per message over the same window; 0
	// where Redis does not report it (a cluster, the embedded Redis).
	RedisCPUPerMessage time.Duration
}

// published defaults and checks cfg and publishes its messages on a new
// benchmark topic, which the caller cleans up.
func published(ctx context.Context, rdb redis.UniversalClient, cfg Config) (Config, stream.Topic, error) {
	cfg = cfg.WithDefaults()
	topic := benchTopic(cfg.Partitions)
	if err := cfg.Validate(); err != nil {
		return cfg, topic, err
	}
	return cfg, topic, publishAll(ctx, rdb, topic, cfg)
}

// Throughput publishes cfg.Messages, then measures how fast one stage copy
// consumes and acknowledges them all.
func Throughput(ctx context.Context, rdb redis.UniversalClient, cfg Config) (Result, error) {
	cfg, topic, err := published(ctx, rdb, cfg)
	defer cleanup(rdb, topic)
	if err != nil {
		return Result{}, err
	}
	var handled atomic.Int64
	done := make(chan struct{})
	total := int64(cfg.Messages)
	stage := stream.Stage{Name: "bench", Topic: topic,
		Config: stream.RunnerConfig{BatchSize: cfg.BatchSize, ReadBytes: cfg.ReadBytes, Block: 100 * time.Millisecond},
		Handler: func(context.Context, *stream.Message) error {
			if handled.Add(1) == total {
				close(done)
			}
			return nil
		}}
	begin, cpu, redisCPU := time.Now(), benchstat.ProcessCPU(), benchstat.RedisCPU(ctx, rdb)
	stop, err := runStage(ctx, rdb, stage, cfg.Telemetry)
	if err != nil {
		return Result{}, err
	}
	phase := cfg.Progress.Start("consume", total)
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
wait:
	for {
		select {
		case <-done:
			break wait
		case <-ctx.Done():
			stop()
			return Result{}, ctx.Err()
		case <-ticker.C:
			phase.Set(handled.Load())
		}
	}
	elapsed, used := time.Since(begin), benchstat.ProcessCPU()-cpu
	phase.Set(handled.Load())
	phase.Done(fmt.Sprintf("%.0f msg/s", float64(cfg.Messages)/elapsed.Seconds()))
	redisUsed := redisPerMessage(ctx, rdb, redisCPU, cfg.Messages)
	stop()
	return Result{Messages: cfg.Messages, Elapsed: elapsed, PerSecond: float64(cfg.Messages) / elapsed.Seconds(),
		CPUPerMessage: used / time.Duration(cfg.Messages), RedisCPUPerMessage: redisUsed}, nil
}

// Latency publishes at cfg.Rate for cfg.Duration while one stage consumes,
// and measures each message's time from just before XADD to its handler.
func Latency(ctx context.Context, rdb redis.UniversalClient, cfg Config) (Result, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	topic := benchTopic(cfg.Partitions)
	defer cleanup(rdb, topic)
	var mu sync.Mutex
	lat := make([]time.Duration, 0, int(float64(cfg.Rate)*cfg.Duration.Seconds())+1)
	seen := make(map[uint64]bool, cap(lat))
	dups := 0
	stage := stream.Stage{Name: "bench", Topic: topic,
		Config: stream.RunnerConfig{BatchSize: cfg.BatchSize, ReadBytes: cfg.ReadBytes, Block: 100 * time.Millisecond},
		Handler: func(_ context.Context, m *stream.Message) error {
			now := time.Now().UnixNano()
			sent := int64(binary.LittleEndian.Uint64(m.Payload))
			seq := binary.LittleEndian.Uint64(m.Payload[8:])
			mu.Lock()
			if seen[seq] {
				dups++
			}
			seen[seq] = true
			lat = append(lat, time.Duration(now-sent))
			mu.Unlock()
			return nil
		}}
	stop, err := runStage(ctx, rdb, stage, cfg.Telemetry)
	if err != nil {
		return Result{}, err
	}
	defer stop()
	pub := stream.NewPublisher(rdb, cfg.publishTelemetry())
	// Publish in ticks of 1ms: Rate/1000 messages per tick, one pipeline.
	perTick := max(1, cfg.Rate/1000)
	interval := time.Duration(float64(time.Second) * float64(perTick) / float64(cfg.Rate))
	total := int(float64(cfg.Rate) * cfg.Duration.Seconds())
	next := time.Now()
	lastReport := time.Now()
	phase := cfg.Progress.Start(fmt.Sprintf("publish at %d msg/s", cfg.Rate), int64(total))
	for sent := 0; sent < total; {
		if d := time.Until(next); d > 0 {
			time.Sleep(d) // pacing the load generator, not synchronizing
		}
		next = next.Add(interval)
		n := min(perTick, total-sent)
		msgs := make([]*stream.Message, n)
		for i := range msgs {
			p := make([]byte, max(16, cfg.PayloadSize))
			binary.LittleEndian.PutUint64(p, uint64(time.Now().UnixNano()))
			binary.LittleEndian.PutUint64(p[8:], uint64(sent+i))
			msgs[i] = stream.NewMessage(fmt.Sprint((sent+i)%1024), "bench", p)
		}
		if err := pub.Publish(ctx, topic, msgs...); err != nil {
			return Result{}, err
		}
		sent += n
		if time.Since(lastReport) > 100*time.Millisecond {
			lastReport = time.Now()
			phase.Set(int64(sent))
		}
	}
	phase.Set(int64(total))
	phase.Done("")
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		got := len(seen)
		mu.Unlock()
		if got >= total {
			break
		}
		if time.Now().After(deadline) {
			return Result{}, fmt.Errorf("streambench: only %d of %d messages arrived", got, total)
		}
		time.Sleep(10 * time.Millisecond) // polling the count
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lat)
	return Result{Messages: total, Elapsed: cfg.Duration, PerSecond: float64(cfg.Rate),
		P50: quantile(lat, 0.50), P99: quantile(lat, 0.99), Max: lat[len(lat)-1], Duplicates: dups}, nil
}

// redisPerMessage is Redis's CPU since before (a RedisCPU reading) per
// message; 0 when Redis does not report its CPU.
func redisPerMessage(ctx context.Context, rdb redis.UniversalClient, before time.Duration, messages int) time.Duration {
	after := benchstat.RedisCPU(ctx, rdb)
	if before == 0 || after < before {
		return 0
	}
	return (after - before) / time.Duration(messages)
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

func runStage(ctx context.Context, rdb redis.UniversalClient, stage stream.Stage, tel stream.Telemetry) (stop func(), err error) {
	r, err := stream.NewRunner(rdb, stage, tel)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			// The stage's own errors surface as missing messages.
			<-done
		})
	}, nil
}

func benchTopic(partitions int) stream.Topic {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return stream.NewTopic("bench"+hex.EncodeToString(b[:]), "load", partitions)
}

func cleanup(rdb redis.UniversalClient, topic stream.Topic) {
	ctx := context.Background()
	for p := 0; p < topic.Partitions; p++ {
		rdb.Del(ctx, topic.Stream(p), topic.DeadLetterStream(p))
	}
}
