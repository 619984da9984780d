package stream

import (
	"context"
	"errors"
	"log/slog"
)

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
