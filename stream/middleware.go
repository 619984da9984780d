package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	dsotel "github.com/dropstream/dropstream/otel"
)

// Handler processes one message. Its error decides the message's fate; see
// the package documentation and Classify.
type Handler func(ctx context.Context, msg *Message) error

// Middleware wraps a Handler with one concern.
type Middleware func(next Handler) Handler

// Chain applies middlewares so that the first one is the outermost.
func Chain(h Handler, mws ...Middleware) Handler {
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i](h)
	}
	return h
}

// PanicError is the error a recovered handler panic becomes.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("handler panic: %v", e.Value) }

// Recovery turns a handler panic into a *PanicError, retried and
// dead-lettered like any failure, so one bad message cannot stop the stage.
func Recovery() Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, msg *Message) (err error) {
			defer func() {
				if r := recover(); r != nil {
					err = &PanicError{Value: r, Stack: debug.Stack()}
				}
			}()
			return next(ctx, msg)
		}
	}
}

// Retry calls the handler again, with doubling pauses and full jitter, while
// it fails retryably, up to cfg.MaxRetries times within one delivery. No
// pause starts once the context ends or the runner stops.
func Retry(cfg RetryConfig) Middleware {
	cfg = cfg.withDefaults()
	return func(next Handler) Handler {
		if cfg.Disabled {
			return next
		}
		return func(ctx context.Context, msg *Message) error {
			err := next(ctx, msg)
			if cfg.MaxRetries == 0 || Classify(err) != OutcomeFailed {
				return err
			}
			bo := NewBackoff(cfg.InitialInterval, cfg.MaxInterval, 0)
			for i := 0; i < cfg.MaxRetries && Classify(err) == OutcomeFailed; i++ {
				wait := bo.NextBackOff()
				if !pauseFor(ctx, wait/2+rand.N(wait/2+1)) {
					return err
				}
				err = next(ctx, msg)
			}
			return err
		}
	}
}

// ErrMaxDeliveries is the reason given to a message that arrives after its
// last allowed delivery (for example one whose handling crashed the process
// every time).
var ErrMaxDeliveries = fmt.Errorf("max deliveries exceeded")

// retrying reports whether err leaves its message to be delivered again:
// a retryable failure, now or after a delay.
func retrying(err error) bool {
	o := Classify(err)
	return o == OutcomeFailed || o == OutcomeDelayed
}

// GiveUp makes a failure at delivery maxDeliveries Permanent, and
// dead-letters a message delivered more often unhandled (ErrMaxDeliveries).
func GiveUp(maxDeliveries int) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, msg *Message) error {
			if msg.Attempt > maxDeliveries {
				return Permanent(fmt.Errorf("%w: delivery %d of %d", ErrMaxDeliveries, msg.Attempt, maxDeliveries))
			}
			err := next(ctx, msg)
			if retrying(err) && msg.Attempt >= maxDeliveries {
				return Permanent(fmt.Errorf("gave up after %d deliveries: %w", msg.Attempt, err))
			}
			return err
		}
	}
}

// Logging logs every failed message at Warn (dead-lettered ones at Error)
// and, when the logger is enabled for Debug, every handled one. Records use
// the handler's context, so a trace-aware slog handler adds trace ids.
func Logging(logger *slog.Logger, info StageInfo) Middleware {
	logger = logger.With("stage", info.Stage, "stream", info.Topic.String())
	return func(next Handler) Handler {
		return func(ctx context.Context, msg *Message) error {
			err := next(ctx, msg)
			outcome := Classify(err)
			switch {
			case outcome == OutcomeDeadLettered:
				logger.ErrorContext(ctx, "message dead-lettered", withStack(attrsOf(msg, outcome, err), err)...)
			case outcome == OutcomeFailed:
				logger.WarnContext(ctx, "message failed", withStack(attrsOf(msg, outcome, err), err)...)
			case outcome == OutcomeDelayed:
				logger.InfoContext(ctx, "message delayed", attrsOf(msg, outcome, err)...)
			case logger.Enabled(ctx, slog.LevelDebug):
				logger.DebugContext(ctx, "message handled", attrsOf(msg, outcome, err)...)
			}
			return err
		}
	}
}

// withStack adds the stack of a recovered panic to log arguments.
func withStack(args []any, err error) []any {
	var pe *PanicError
	if errors.As(err, &pe) {
		args = append(args, "stack", string(pe.Stack))
	}
	return args
}

func attrsOf(msg *Message, outcome Outcome, err error) []any {
	args := []any{"id", msg.ID, "key", msg.Key, "type", msg.Type, "attempt", msg.Attempt, "outcome", string(outcome)}
	if err != nil {
		args = append(args, "error", err.Error())
	}
	return args
}

// Metrics records, per message, dropstream.stage.handler.duration and
// dropstream.stage.message.age (time from publish to processing). The
// runner counts dropstream.stage.messages by outcome once per batch.
func Metrics(mp metric.MeterProvider, info StageInfo) Middleware {
	attrs := attribute.NewSet(dsotel.StageKey.String(info.Stage), dsotel.StreamKey.String(info.Topic.String()))
	duration := latencyHistogram(mp, dsotel.MetricStageHandlerDuration, descHandlerDuration, attrs)
	age := latencyHistogram(mp, dsotel.MetricStageMessageAge, descMessageAge, attrs)
	return func(next Handler) Handler {
		return func(ctx context.Context, msg *Message) error {
			start := time.Now()
			if ms, ok := idMillis(msg.ID); ok && msg.Attempt == 1 {
				age(max(0, float64(start.UnixMilli()-ms)/1e3))
			}
			err := next(ctx, msg)
			duration(time.Since(start).Seconds())
			return err
		}
	}
}
