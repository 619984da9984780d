package notifier

import (
	"log/slog"
)

// Names of the webhook and log channels.
const (
	ChannelWebhook = "webhook"
	ChannelLog     = "log"
)

// NewChannels returns the channels a watcher may name, keyed by name: the
// webhook channel configured by webhook, and the log channel writing to
// logger (slog.Default when nil). Pass the map to a Dispatcher.
func NewChannels(webhook WebhookConfig, logger *slog.Logger) (map[string]Channel, error) {
	wh, err := NewWebhookChannel(webhook)
	if err != nil {
		return nil, err
	}
	return map[string]Channel{ChannelWebhook: wh, ChannelLog: NewLogChannel(logger)}, nil
}
