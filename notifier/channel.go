package notifier

import (
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"time"

	"github.com/dropstream/dropstream/notifier/channel"
)

// Names of the webhook and log channels.
const (
	ChannelWebhook = "webhook"
	ChannelLog     = "log"
)

// NewChannels returns the webhook and log channels by name, for a
// Dispatcher; logger defaults to slog.Default.
func NewChannels(webhook WebhookConfig, logger *slog.Logger) (map[string]Channel, error) {
	wh, err := NewWebhookChannel(webhook)
	if err != nil {
		return nil, err
	}
	return map[string]Channel{ChannelWebhook: wh, ChannelLog: NewLogChannel(logger)}, nil
}

// Channel delivers notifications over one medium; see channel.Channel.
type Channel = channel.Channel

// Recipient is who a notification goes to; see channel.Recipient.
type Recipient = channel.Recipient

// Notification is one message to one recipient; see channel.Notification.
type Notification = channel.Notification

// DeliveryError is the error of a failed send; see channel.DeliveryError.
type DeliveryError = channel.DeliveryError

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

// ChannelSlack is the Slack-style webhook channel's name.
const ChannelSlack = "slack"

// SlackChannel posts {"text": …} (title, text, unsubscribe link) to
// Slack-style webhooks over the webhook channel.
type SlackChannel struct{ wh *WebhookChannel }

// NewSlackChannel returns the "slack" channel over a webhook channel.
func NewSlackChannel(wh *WebhookChannel) *SlackChannel { return &SlackChannel{wh: wh} }

// Name returns ChannelSlack.
func (s *SlackChannel) Name() string { return ChannelSlack }

// Send posts n's text; see SlackChannel.
func (s *SlackChannel) Send(ctx context.Context, n Notification) error {
	lines := []string{}
	for _, l := range []string{n.Title, n.Text} {
		if l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		lines = append(lines, n.Event+": "+n.Subject)
	}
	if n.UnsubscribeURL != "" {
		lines = append(lines, "<"+n.UnsubscribeURL+"|Unsubscribe>")
	}
	n.Body, _ = json.Marshal(map[string]string{"text": strings.Join(lines, "\n")}) // a map of strings always encodes
	return s.wh.Send(ctx, n)
}
