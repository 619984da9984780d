package stream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	dsotel "github.com/dropstream/dropstream/otel"
)

// BatchHandler processes a whole batch at once. A nil error acknowledges
// every message; a *BatchError settles each by its own error; any other
// error applies to all. Errors are classified as for Handler.
type BatchHandler func(ctx context.Context, msgs []*Message) error

// BatchError carries one error per message of a batch, by index.
type BatchError struct {
	Errs []error
}

func (e *BatchError) Error() string {
	n := 0
	var first error
	for _, err := range e.Errs {
		if err != nil {
			first = cmp.Or(first, err)
			n++
		}
	}
	return fmt.Sprintf("%d of %d messages failed, first: %v", n, len(e.Errs), first)
}

// maxBatchLinks caps a batch span's links at the SDK's default limit.
const maxBatchLinks = 128

// batchRunner runs a BatchHandler with the runtime's concerns: a "process"
// span per batch linked to each message's producer, metrics, logging,
// retries of the failed subset, a timeout, recovery and the give-up rule.
type batchRunner struct {
	h        BatchHandler
	cfg      RunnerConfig
	tel      Telemetry
	info     StageInfo
	tracer   trace.Tracer
	duration func(float64)
	age      func(float64)
	spanOpts []trace.SpanStartOption
}

func newBatchRunner(h BatchHandler, cfg RunnerConfig, tel Telemetry, info StageInfo) *batchRunner {
	attrs := attribute.NewSet(dsotel.StageKey.String(info.Stage), dsotel.StreamKey.String(info.Topic.String()))
	return &batchRunner{h: h, cfg: cfg, tel: tel, info: info, tracer: tel.TracerProvider.Tracer(instrumentationScope),
		duration: latencyHistogram(tel.MeterProvider, dsotel.MetricStageHandlerDuration, descHandlerDuration, attrs),
		age:      latencyHistogram(tel.MeterProvider, dsotel.MetricStageMessageAge, descMessageAge, attrs),
		spanOpts: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(dsotel.MessagingSystem,
			dsotel.MessagingOperationTypeKey.String("process"), dsotel.MessagingDestinationNameKey.String(info.Topic.String()), dsotel.MessagingConsumerGroupNameKey.String(info.Group))}}
}

// handle runs the batch and returns one error per message. take(id)
// reports whether a held message is still this copy's to call again, and
// restarts the clock of its delivery (see inflight).
func (b *batchRunner) handle(ctx context.Context, msgs []*Message, take func(id string) bool) []error {
	errs := make([]error, len(msgs))
	start := time.Now()
	links := make([]trace.Link, 0, min(len(msgs), maxBatchLinks))
	var run []int // indices handed to the handler
	for i, m := range msgs {
		m.ctx = m.reuse.extract(ctx, b.tel.Propagator, m)
		if sc := trace.SpanContextFromContext(m.ctx); sc.IsValid() && len(links) < maxBatchLinks {
			links = append(links, trace.Link{SpanContext: sc})
		}
		if ms, ok := idMillis(m.ID); ok && m.Attempt == 1 {
			b.age(max(0, float64(start.UnixMilli()-ms)/1e3))
		}
		if m.Attempt > b.cfg.MaxDeliveries {
			errs[i] = Permanent(fmt.Errorf("%w: delivery %d of %d", ErrMaxDeliveries, m.Attempt, b.cfg.MaxDeliveries))
			continue
		}
		run = append(run, i)
	}
	ctx, span := b.tracer.Start(ctx, "process "+b.info.Topic.String(),
		append(b.spanOpts, trace.WithLinks(links...), trace.WithAttributes(dsotel.MessagingBatchMessageCountKey.Int(len(msgs))))...)
	defer span.End()
	wait, hold := b.cfg.Retry.InitialInterval, time.Duration(0)
	for try := 0; len(run) > 0; {
		b.call(ctx, msgs, run, errs)
		// Held messages (Hold) are called again for as long as they stay
		// this copy's; other failures by the Retry rules.
		again := !b.cfg.Retry.Disabled && try < b.cfg.Retry.MaxRetries
		pause, held := time.Duration(0), false
		next := run[:0]
		for _, i := range run {
			switch {
			case Classify(errs[i]) != OutcomeFailed:
			case IsHold(errs[i]):
				if take(msgs[i].ID) {
					next, held = append(next, i), true
				}
			case again:
				next = append(next, i)
				pause = wait/2 + rand.N(wait/2+1)
			}
		}
		run = next
		if pause > 0 {
			try++
			wait = min(2*wait, b.cfg.Retry.MaxInterval)
		}
		if held {
			hold = min(max(2*hold, minHoldPause), b.cfg.ErrorBackoff)
			if pause == 0 || hold < pause {
				pause = hold
			}
		}
		if len(run) == 0 || !pauseFor(ctx, pause) {
			break
		}
	}
	b.duration(time.Since(start).Seconds())
	failed, stillHeld := 0, 0
	for i, m := range msgs {
		// A batch still held was stopped, not failed: it stays pending.
		if retrying(errs[i]) && !IsHold(errs[i]) && m.Attempt >= b.cfg.MaxDeliveries {
			errs[i] = Permanent(fmt.Errorf("gave up after %d deliveries: %w", m.Attempt, errs[i]))
		}
		switch Classify(errs[i]) {
		case OutcomeFailed:
			failed++
			if IsHold(errs[i]) {
				stillHeld++ // one line for the batch, below
				continue
			}
			b.tel.Logger.WarnContext(m.ctx, "message failed", append(attrsOf(m, OutcomeFailed, errs[i]), "stage", b.info.Stage)...)
		case OutcomeDeadLettered:
			failed++
			b.tel.Logger.ErrorContext(m.ctx, "message dead-lettered", append(attrsOf(m, OutcomeDeadLettered, errs[i]), "stage", b.info.Stage)...)
		}
	}
	if stillHeld > 0 {
		b.tel.Logger.WarnContext(ctx, "held batch released at stop; its messages stay pending", "stage", b.info.Stage,
			"stream", b.info.Topic.String(), "messages", stillHeld)
	}
	if failed > 0 {
		span.SetStatus(codes.Error, fmt.Sprintf("%d of %d messages failed", failed, len(msgs)))
	}
	return errs
}

// call invokes the handler on the messages at idx, with the timeout and
// panic recovery, and spreads its result over errs.
func (b *batchRunner) call(ctx context.Context, msgs []*Message, idx []int, errs []error) {
	sub := make([]*Message, len(idx))
	for j, i := range idx {
		sub[j] = msgs[i]
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.HandlerTimeout)
	defer cancel()
	err := Recovery()(func(ctx context.Context, _ *Message) error { return b.h(ctx, sub) })(ctx, nil)
	var be *BatchError
	if errors.As(err, &be) && len(be.Errs) == len(sub) {
		for j, i := range idx {
			errs[i] = be.Errs[j]
		}
		return
	}
	if be != nil {
		err = fmt.Errorf("batch handler returned %d errors for %d messages: %w", len(be.Errs), len(sub), err)
	}
	for _, i := range idx {
		errs[i] = err
	}
}
