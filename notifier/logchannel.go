package notifier

import (
	"cmp"
	"context"
	"log/slog"
	"time"
)

// LogChannel writes one log line per notification; it never fails.
type LogChannel struct {
	logger *slog.Logger
}

// NewLogChannel returns the "log" channel; logger defaults to slog.Default.
func NewLogChannel(logger *slog.Logger) *LogChannel {
	return &LogChannel{logger: cmp.Or(logger, slog.Default())}
}

// Name returns ChannelLog.
func (l *LogChannel) Name() string { return ChannelLog }

// Send logs "notification" at Info with n's fields and origin_trace_id,
// not its body.
func (l *LogChannel) Send(ctx context.Context, n Notification) error {
	l.logger.LogAttrs(ctx, slog.LevelInfo, "notification",
		slog.String("channel", ChannelLog),
		slog.String("flow", n.Flow),
		slog.String("event", n.Event),
		slog.String("recipient_id", n.Recipient.ID),
		slog.String("subject", n.Subject),
		slog.String("event_id", n.EventID),
		slog.String("session_id", n.SessionID),
		slog.String("origin_trace_id", n.TraceID),
		slog.Time("observed_at", n.ObservedAt.UTC().Truncate(time.Millisecond)))
	return nil
}
