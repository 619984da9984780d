package notifier

import (
	"log/slog"
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
