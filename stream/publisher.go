package stream

import (
	"context"
	"fmt"
	"strconv"
	"strings"

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
}

// NewPublisher returns a publisher instrumented with tel.
func NewPublisher(rdb redis.UniversalClient, tel Telemetry) *Publisher {
	tel = tel.WithDefaults()
	meter := tel.MeterProvider.Meter(instrumentationScope)
	count, _ := meter.Int64Counter(dsotel.MetricStreamPublished,
		metric.WithDescription("Messages appended to streams."), metric.WithUnit(dsotel.UnitMessages))
	return &Publisher{rdb: rdb, tel: tel, tracer: tel.TracerProvider.Tracer(instrumentationScope), count: count}
}

// Publish appends msgs to topic, each to its Key's partition, in pipelined
// round trips of up to 500 entries, and sets their ID, Stream and Partition.
// Each carries the trace context of its own Context, else the publish span's.
// On error some may have been appended (their IDs are set).
func (p *Publisher) Publish(ctx context.Context, topic Topic, msgs ...*Message) error {
	return p.PublishAll(ctx, Batch{Topic: topic, Messages: msgs})
}

// Batch is messages for one topic.
type Batch struct {
	Topic    Topic
	Messages []*Message
}

// PublishAll appends the messages of several topics like Publish, in the
// same round trips, with a "send" span and count per topic.
func (p *Publisher) PublishAll(ctx context.Context, batches ...Batch) error {
	type part struct {
		batch Batch
		span  trace.Span
		trace sharedTrace
	}
	parts := make([]part, 0, len(batches))
	var names []string // of the parts' topics
	total := 0
	for _, b := range batches {
		if len(b.Messages) == 0 {
			continue
		}
		name := b.Topic.String()
		sctx, span := p.tracer.Start(ctx, "send "+name,
			trace.WithSpanKind(trace.SpanKindProducer),
			trace.WithAttributes(dsotel.MessagingSystem, dsotel.MessagingDestinationNameKey.String(name),
				dsotel.MessagingOperationTypeKey.String("send"), dsotel.MessagingBatchMessageCountKey.Int(len(b.Messages))))
		parts = append(parts, part{b, span, sharedTrace{parent: sctx}})
		names = append(names, name)
		total += len(b.Messages)
	}
	if total == 0 {
		return nil
	}
	var err error
	defer func() {
		for _, pt := range parts {
			if err != nil {
				pt.span.RecordError(err)
				pt.span.SetStatus(codes.Error, err.Error())
			} else if len(pt.batch.Messages) == 1 {
				m := pt.batch.Messages[0]
				pt.span.SetAttributes(dsotel.MessagingMessageIDKey.String(m.ID), dsotel.MessagingDestinationPartitionIDKey.String(strconv.Itoa(m.Partition)))
			}
			pt.span.End()
		}
	}()
	sent := make([]*Message, 0, min(total, publishChunk))
	// counts are the messages of each part in the round trip being built.
	counts := make([]int64, len(parts))
	pipe := p.rdb.Pipeline()
	flush := func() error {
		cmds, err := pipe.Exec(ctx)
		for i, c := range cmds {
			if c.Err() == nil {
				sent[i].ID = c.(*redis.StringCmd).Val()
			}
		}
		sent = sent[:0]
		if err != nil {
			return fmt.Errorf("publish to %s: %w", strings.Join(names, ", "), err)
		}
		for i, n := range counts {
			if n > 0 {
				p.count.Add(ctx, n, metric.WithAttributes(dsotel.StreamKey.String(names[i])))
				counts[i] = 0
			}
		}
		return nil
	}
	for i := range parts {
		pt := &parts[i]
		for _, m := range pt.batch.Messages {
			p.xadd(ctx, &pt.trace, pipe, pt.batch.Topic, m)
			sent = append(sent, m)
			counts[i]++
			if len(sent) == publishChunk {
				if err = flush(); err != nil {
					return err
				}
			}
		}
	}
	if len(sent) > 0 {
		err = flush()
	}
	return err
}

// Queue adds the XADDs of msgs to pipe, for a caller whose appends go in the
// same round trip as its own writes. It sets each message's Partition, Stream
// and trace context (ctx's, or its own Context's); after pipe runs, the
// returned commands hold the IDs. It starts no span and counts nothing.
func (p *Publisher) Queue(ctx context.Context, pipe redis.Pipeliner, topic Topic, msgs ...*Message) []*redis.StringCmd {
	cmds := make([]*redis.StringCmd, len(msgs))
	shared := sharedTrace{parent: ctx}
	for i, m := range msgs {
		cmds[i] = p.xadd(ctx, &shared, pipe, topic, m)
	}
	return cmds
}

// xadd queues the XADD of m to its partition of topic, carrying the trace
// context of m's own Context, else shared's.
func (p *Publisher) xadd(ctx context.Context, shared *sharedTrace, pipe redis.Pipeliner, topic Topic, m *Message) *redis.StringCmd {
	m.Partition = topic.Partition(m.Key)
	m.Stream = topic.Stream(m.Partition)
	if m.ctx != nil && trace.SpanContextFromContext(m.ctx).IsValid() {
		InjectTrace(m.ctx, p.tel.Propagator, m)
	} else {
		shared.inject(p.tel.Propagator, m)
	}
	return pipe.XAdd(ctx, &redis.XAddArgs{Stream: m.Stream, Values: m.values()})
}
