package notifier

import (
	"cmp"
	"context"
	"log/slog"
	"time"
)

// LogChannel writes one structured log line per notification. It never
// fails; it suits development and recipients who read the logs.
type LogChannel struct {
	logger *slog.Logger
}

// NewLogChannel returns the "log" channel writing to logger (slog.Default
// when nil).
func NewLogChannel(logger *slog.Logger) *LogChannel {
	logger = cmp.Or(logger, slog.Default())
	return &LogChannel{logger: logger}
}

// Name returns ChannelLog.
func (l *LogChannel) Name() string { return ChannelLog }

// Send logs "notification" at Info level with the notification's flow,
// event, recipient, subject, event and session ids, observation time and
// origin_trace_id (the trace that produced the event; the log handler adds
// trace_id and span_id of the delivery's own span). The body is not logged.
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
