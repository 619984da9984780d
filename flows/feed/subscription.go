package feed

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/mail"
	"net/url"
	"strings"
	"time"

	"github.com/dropstream/dropstream/notifier"
)

// Destination kinds and the notifier channel each is delivered on.
const (
	// DestEmail: an e-mail address, personal part allowed
	// ("Buffy <b@slayers.org>"); delivered on the notifier's "email"
	// channel when one is configured.
	DestEmail = "email"
	// DestWebhook: an http(s) URL receiving the rendered collection as
	// JSON, signed with the subscription's secret.
	DestWebhook = "webhook"
	// DestLog: a structured log line (development, the demo).
	DestLog = "log"
)

// ChannelEmail is the channel name e-mail destinations are sent on.
const ChannelEmail = "email"

// Destination is where a subscription's collections go (the seed's
// destination_json). Unique returns its core: two destinations with the
// same core are the same subscriber.
type Destination struct {
	Kind string `json:"kind"`
	// Address is the e-mail address (DestEmail).
	Address string `json:"address,omitempty"`
	// URL is the webhook URL (DestWebhook).
	URL string `json:"url,omitempty"`
	// Name labels a log destination (DestLog).
	Name string `json:"name,omitempty"`
}

// Validate checks the destination for its kind.
func (d Destination) Validate() error {
	_, err := d.Unique()
	return err
}

// Unique returns the destination's unique core: the lower-cased address of
// an e-mail (no personal part), the URL of a webhook, the name of a log.
func (d Destination) Unique() (string, error) {
	switch d.Kind {
	case DestEmail:
		if len(d.Address) > 320 || !printable(d.Address) {
			return "", fmt.Errorf("%w destination: address too long or not printable", ErrInvalid)
		}
		a, err := mail.ParseAddress(d.Address)
		if err != nil {
			return "", fmt.Errorf("%w destination: address: %s", ErrInvalid, clip(err.Error(), 100))
		}
		return "email:" + strings.ToLower(a.Address), nil
	case DestWebhook:
		u, err := url.Parse(d.URL)
		if err != nil || len(d.URL) > MaxURLBytes || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || !printable(d.URL) {
			return "", fmt.Errorf("%w destination: url: want an http(s) URL", ErrInvalid)
		}
		u.Host = strings.ToLower(u.Host)
		return "webhook:" + u.String(), nil
	case DestLog:
		if !validName(d.Name) {
			return "", fmt.Errorf("%w destination: name: want 1-64 characters of [a-z0-9_-]", ErrInvalid)
		}
		return "log:" + d.Name, nil
	}
	return "", fmt.Errorf("%w destination: kind: want %s, %s or %s", ErrInvalid, DestEmail, DestWebhook, DestLog)
}

// Channel is the notifier channel the destination is delivered on.
func (d Destination) Channel() string {
	switch d.Kind {
	case DestWebhook:
		return notifier.ChannelWebhook
	case DestLog:
		return notifier.ChannelLog
	}
	return ChannelEmail
}

// address is the recipient address in channel terms.
func (d Destination) address() string {
	switch d.Kind {
	case DestEmail:
		return d.Address
	case DestWebhook:
		return d.URL
	}
	return ""
}

// Subscription maps a destination to a subscribable. Only confirmed
// subscriptions receive collections.
type Subscription struct {
	ID           string      `json:"id"`
	FeedID       string      `json:"feed_id"`
	Subscribable string      `json:"subscribable"`
	Destination  Destination `json:"destination"`
	// Unique is the destination's core; one subscription per core and
	// subscribable.
	Unique    string    `json:"unique"`
	Confirmed bool      `json:"confirmed"`
	Added     time.Time `json:"added"`
	// Secret signs webhook deliveries; shown only when created.
	Secret string `json:"secret,omitempty"`
	// ConfirmToken and UnsubscribeToken make the links of the messages;
	// never shown by the API.
	ConfirmToken     string `json:"confirm_token,omitempty"`
	UnsubscribeToken string `json:"unsubscribe_token,omitempty"`
}

// public returns the subscription without its secret and tokens.
func (s Subscription) public() Subscription {
	s.Secret, s.ConfirmToken, s.UnsubscribeToken = "", "", ""
	return s
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}
