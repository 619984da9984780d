package streambench

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/benchstat"
	"github.com/dropstream/dropstream/stream"
)

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
	for range cfg.Partitions {
		streams = append(streams, ">")
	}
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
