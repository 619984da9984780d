package notifier

import (
	"context"
	"encoding/json"
	"strings"
)

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
