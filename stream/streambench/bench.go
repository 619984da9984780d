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
	"github.com/dropstream/dropstream/internal/settings"
	"github.com/dropstream/dropstream/stream"
)

// Config describes one run. Zero fields take their defaults.
type Config struct {
	// Messages is the number of messages of a throughput run. Default 200000.
	Messages int `default:"200000" range:"1.."`
	// Partitions of the benchmark topic. Default 4.
	Partitions int `default:"4" range:"1.."`
	// BatchSize is plain go-redis's XREADGROUP COUNT and the stage's most.
	// Default 500.
	BatchSize int `flag:"batch" default:"500" range:"1.." help:"XREADGROUP COUNT of plain go-redis, and the most the stage's reads ask for"`
	// ReadBytes is the stage's ReadBytes. Default stream.DefaultReadBytes.
	ReadBytes int
	// PayloadSize is the payload length in bytes. Default 200.
	PayloadSize int `flag:"payload" default:"200" range:"8.." help:"payload bytes"`
	// Rate is the publish rate of a latency run, in messages/s. Default 10000.
	Rate int `flag:"rate" default:"10000" range:"1.." help:"publish rate of the latency run, messages/s"`
	// Duration of a latency run. Default 10s.
	Duration time.Duration `flag:"duration" default:"10s" range:"1ns.." help:"length of the latency run (0: none)"`
	// Telemetry instruments the stage.
	Telemetry stream.Telemetry
	// PublishTelemetry, when set, instruments the publisher instead: a traced
	// publisher and a stage without telemetry cost what carrying context does.
	PublishTelemetry *stream.Telemetry
	// Progress, when set, shows each phase with its counts.
	Progress *progress.Printer
}

func (c Config) publishTelemetry() stream.Telemetry {
	if c.PublishTelemetry != nil {
		return *c.PublishTelemetry
	}
	return c.Telemetry
}

// prepare fills c's zero fields and checks it.
func (c *Config) prepare() error {
	c.ReadBytes = cmp.Or(c.ReadBytes, stream.DefaultReadBytes)
	return settings.Prepare("streambench", c)
}

// Result is what a run measured.
type Result struct {
	Messages  int
	Elapsed   time.Duration
	PerSecond float64
	benchstat.Latencies
	Duplicates int
	// CPU is this process's and Redis's CPU per message consumed,
	// publishing excluded: steadier than PerSecond on a loaded machine.
	// Redis's is 0 where it does not report it (a cluster, the embedded
	// Redis).
	CPU benchstat.CPU
}

// published defaults and checks cfg and publishes its messages on a new
// benchmark topic, which the caller cleans up.
func published(ctx context.Context, rdb redis.UniversalClient, cfg Config) (Config, stream.Topic, error) {
	err := cfg.prepare()
	topic := benchTopic(cfg.Partitions)
	if err != nil {
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
	finished := make(chan struct{})
	total := int64(cfg.Messages)
	stage := stream.Stage{Name: "bench", Topic: topic,
		Config: stream.RunnerConfig{BatchSize: cfg.BatchSize, ReadBytes: cfg.ReadBytes, Block: 100 * time.Millisecond},
		Handler: func(context.Context, *stream.Message) error {
			if handled.Add(1) == total {
				close(finished)
			}
			return nil
		}}
	begin, cpu := time.Now(), benchstat.ReadCPU(ctx, rdb)
	stop, err := stream.RunStages(ctx, rdb, cfg.Telemetry, 1, stage)
	if err != nil {
		return Result{}, err
	}
	defer stop()
	phase := cfg.Progress.Start("consume", total)
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	for done := false; !done; {
		select {
		case <-ctx.Done():
			return Result{}, ctx.Err()
		case <-ticker.C:
			phase.Set(handled.Load())
		case <-finished:
			done = true
		}
	}
	return consumed(ctx, rdb, cfg, phase, begin, cpu), nil
}

// Latency publishes at cfg.Rate for cfg.Duration while one stage consumes,
// and measures each message's time from just before XADD to its handler.
func Latency(ctx context.Context, rdb redis.UniversalClient, cfg Config) (Result, error) {
	if err := cfg.prepare(); err != nil {
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
	stop, err := stream.RunStages(ctx, rdb, cfg.Telemetry, 1, stage)
	if err != nil {
		return Result{}, err
	}
	defer stop()
	pub := stream.NewPublisher(rdb, cfg.publishTelemetry())
	total := int(float64(cfg.Rate) * cfg.Duration.Seconds())
	phase := cfg.Progress.Start(fmt.Sprintf("publish at %d msg/s", cfg.Rate), int64(total))
	// Each tick of 1ms publishes the messages due in one pipeline.
	if err := benchstat.Pace(ctx, time.Millisecond, float64(cfg.Rate), total, phase, func(from, n int) error {
		msgs := make([]*stream.Message, n)
		for i := range msgs {
			p := make([]byte, max(16, cfg.PayloadSize))
			binary.LittleEndian.PutUint64(p, uint64(time.Now().UnixNano()))
			binary.LittleEndian.PutUint64(p[8:], uint64(from+i))
			msgs[i] = stream.NewMessage(fmt.Sprint((from+i)%1024), "bench", p)
		}
		return pub.Publish(ctx, topic, msgs...)
	}); err != nil {
		return Result{}, err
	}
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = benchstat.Until(wait, 10*time.Millisecond, func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) >= total, nil
	})
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		return Result{}, fmt.Errorf("streambench: only %d of %d messages arrived: %w", len(seen), total, err)
	}
	return Result{Messages: total, Elapsed: cfg.Duration, PerSecond: float64(cfg.Rate), Latencies: benchstat.Summarize(lat), Duplicates: dups}, nil
}

// consumed ends the consume phase of cfg.Messages begun at begin with cpu
// read, and is its Result.
func consumed(ctx context.Context, rdb redis.UniversalClient, cfg Config, phase *progress.Phase, begin time.Time, cpu benchstat.CPU) Result {
	elapsed := time.Since(begin)
	used := benchstat.ReadCPU(ctx, rdb).PerItem(cpu, cfg.Messages)
	phase.Set(int64(cfg.Messages))
	phase.Done(fmt.Sprintf("%.0f msg/s", float64(cfg.Messages)/elapsed.Seconds()))
	return Result{Messages: cfg.Messages, Elapsed: elapsed, PerSecond: float64(cfg.Messages) / elapsed.Seconds(), CPU: used}
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

// Plain is the baseline of Throughput: the same messages consumed by
// go-redis alone, one XREADGROUP over every partition then one pipelined
// XACK per stream. A runtime figure over Plain's, from the same run, is the
// runtime's cost whatever the machine's load.
func Plain(ctx context.Context, rdb redis.UniversalClient, cfg Config) (Result, error) {
	cfg, topic, err := published(ctx, rdb, cfg)
	defer cleanup(rdb, topic)
	if err != nil {
		return Result{}, err
	}
	const group = "plain"
	streams := make([]string, 0, 2*cfg.Partitions)
	for p := range cfg.Partitions {
		if err := rdb.XGroupCreateMkStream(ctx, topic.Stream(p), group, "0").Err(); err != nil {
			return Result{}, fmt.Errorf("streambench: create group: %w", err)
		}
		streams = append(streams, topic.Stream(p))
	}
	streams = append(streams, slices.Repeat([]string{">"}, cfg.Partitions)...)
	begin, lastReport, cpu := time.Now(), time.Now(), benchstat.ReadCPU(ctx, rdb)
	phase := cfg.Progress.Start("consume", int64(cfg.Messages))
	handled := 0
	for handled < cfg.Messages {
		res, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: group, Consumer: "plain", Streams: streams,
			Count: int64(cfg.BatchSize), Block: 100 * time.Millisecond}).Result()
		if err != nil && err != redis.Nil {
			return Result{}, fmt.Errorf("streambench: read: %w", err)
		}
		pipe := rdb.Pipeline()
		for _, s := range res {
			if len(s.Messages) == 0 {
				continue
			}
			ids := make([]string, len(s.Messages))
			for i, m := range s.Messages {
				ids[i] = m.ID
			}
			pipe.XAck(ctx, s.Stream, group, ids...)
			handled += len(ids)
		}
		if pipe.Len() > 0 {
			if _, err := pipe.Exec(ctx); err != nil {
				return Result{}, fmt.Errorf("streambench: ack: %w", err)
			}
		}
		if time.Since(lastReport) > 100*time.Millisecond {
			lastReport = time.Now()
			phase.Set(int64(handled))
		}
	}
	return consumed(ctx, rdb, cfg, phase, begin, cpu), nil
}

// publishAll publishes cfg.Messages of cfg.PayloadSize bytes to topic, in
// pipelines of 5,000, through the runtime's publisher without telemetry.
func publishAll(ctx context.Context, rdb redis.UniversalClient, topic stream.Topic, cfg Config) error {
	pub := stream.NewPublisher(rdb, cfg.publishTelemetry())
	payload := make([]byte, cfg.PayloadSize)
	batch := make([]*stream.Message, 0, 5000)
	phase := cfg.Progress.Start("publish", int64(cfg.Messages))
	for i := 0; i < cfg.Messages; i++ {
		batch = append(batch, stream.NewMessage(fmt.Sprint(i%1024), "bench", payload))
		if len(batch) == cap(batch) || i == cfg.Messages-1 {
			if err := pub.Publish(ctx, topic, batch...); err != nil {
				return err
			}
			batch = batch[:0]
			phase.Set(int64(i + 1))
		}
	}
	phase.Done("")
	return nil
}
