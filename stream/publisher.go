package stream

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	dsotel "github.com/dropstream/dropstream/otel"
)

// publishChunk is how many XADDs go in one pipeline round trip.
const publishChunk = 500

// Publisher appends messages to the partitions of a topic.
type Publisher struct {
	rdb    redis.UniversalClient
	tel    Telemetry
	tracer trace.Tracer
	count  metric.Int64Counter
	// MaxLen, when positive, caps each stream approximately (XADD MAXLEN ~).
	// Leave it 0 for streams read by consumer groups: a cap can drop
	// unacknowledged entries; use a Trimmer instead.
	MaxLen int64
}

// NewPublisher returns a publisher instrumented with tel.
func NewPublisher(rdb redis.UniversalClient, tel Telemetry) *Publisher {
	tel = tel.withDefaults()
	meter := tel.MeterProvider.Meter(instrumentationScope)
	count, _ := meter.Int64Counter(dsotel.MetricStreamPublished,
		metric.WithDescription("Messages appended to streams."), metric.WithUnit(dsotel.UnitMessages))
	return &Publisher{rdb: rdb, tel: tel, tracer: tel.TracerProvider.Tracer(instrumentationScope), count: count}
}

// Publish appends msgs to topic, each to the partition of its Key, in
// pipelined round trips of up to 500 entries. On success every message has
// its ID, Stream and Partition set. Each message carries the trace context
// of its own Context when it has one, otherwise that of the publish span.
// On error some messages may have been appended; their IDs are set.
func (p *Publisher) Publish(ctx context.Context, topic Topic, msgs ...*Message) error {
	if len(msgs) == 0 {
		return nil
	}
	ctx, span := p.tracer.Start(ctx, "send "+topic.String(),
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attrSystem, keyDestination.String(topic.String()),
			keyOperation.String("send"), keyBatchCount.Int(len(msgs))))
	defer span.End()
	cmds := make([]*redis.StringCmd, 0, min(len(msgs), publishChunk))
	for start := 0; start < len(msgs); start += publishChunk {
		chunk := msgs[start:min(start+publishChunk, len(msgs))]
		cmds = cmds[:0]
		pipe := p.rdb.Pipeline()
		for _, m := range chunk {
			m.Partition = topic.Partition(m.Key)
			m.Stream = topic.Stream(m.Partition)
			parent := ctx
			if m.ctx != nil && trace.SpanContextFromContext(m.ctx).IsValid() {
				parent = m.ctx
			}
			InjectTrace(parent, p.tel.Propagator, m)
			args := &redis.XAddArgs{Stream: m.Stream, Values: m.values()}
			if p.MaxLen > 0 {
				args.MaxLen, args.Approx = p.MaxLen, true
			}
			cmds = append(cmds, pipe.XAdd(ctx, args))
		}
		_, err := pipe.Exec(ctx)
		for i, c := range cmds {
			if c.Err() == nil {
				chunk[i].ID = c.Val()
			}
		}
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
			return fmt.Errorf("publish to %s: %w", topic, err)
		}
		p.count.Add(ctx, int64(len(chunk)), metric.WithAttributes(keyStream.String(topic.String())))
	}
	if len(msgs) == 1 {
		span.SetAttributes(keyMessageID.String(msgs[0].ID), keyPartition.String(strconv.Itoa(msgs[0].Partition)))
	}
	return nil
}
