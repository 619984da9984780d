package feed

import (
	"fmt"
	"net/mail"
	"net/url"
	"strings"
	"time"

	"github.com/dropstream/dropstream/notifier/subscriber"
)

// Destination kinds and the notifier channel each is delivered on.
const (
	// DestEmail: an e-mail address ("Buffy <b@slayers.org>"), delivered by
	// the notifier's "email" channel.
	DestEmail = "email"
	// DestWebhook: an http(s) URL receiving the collection as the
	// notifier's signed JSON message; a notifier subscriber.
	DestWebhook = "webhook"
	// DestLog: a structured log line (development, the demo), through the
	// flow's Sender; confirmed when created.
	DestLog = "log"
)

// Destination is where a subscription's collections go. Unique returns its
// core: two destinations with the same core are the same subscriber.
type Destination struct {
	Kind string `json:"kind"`
	// Address is the e-mail address (DestEmail).
	Address string `json:"address,omitempty"`
	// URL is the webhook URL (DestWebhook).
	URL string `json:"url,omitempty"`
	// Name labels a log destination (DestLog).
	Name string `json:"name,omitempty"`
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

// notifierDestination is the destination for the notifier's subscriber
// store, and its name; ok is false for a log destination.
func (d Destination) notifierDestination() (dest subscriber.Destination, name string, ok bool) {
	switch d.Kind {
	case DestEmail:
		a, err := mail.ParseAddress(d.Address)
		if err != nil {
			return subscriber.Destination{}, "", false
		}
		name = a.Name
		if name == "" || len(name) > subscriber.MaxNameLen {
			name = a.Address
		}
		return subscriber.Destination{Kind: subscriber.KindEmail, Address: a.Address}, clip(name, subscriber.MaxNameLen), true
	case DestWebhook:
		return subscriber.Destination{Kind: subscriber.KindWebhook, Address: d.URL}, clip(d.URL, subscriber.MaxNameLen), true
	}
	return subscriber.Destination{}, "", false
}

// Subscription maps a destination to a subscribable. E-mail and webhook
// ones deliver through a notifier subscriber; log ones start confirmed.
type Subscription struct {
	ID           string `json:"id"`
	FeedID       string `json:"feed_id"`
	Subscribable string `json:"subscribable"`
	// Tenant is its subscribable's ("": tenancy.Open).
	Tenant      string      `json:"tenant,omitempty"`
	Destination Destination `json:"destination"`
	// Unique is the destination's core; one subscription per core and
	// subscribable.
	Unique string `json:"unique"`
	// SubscriberID and DestinationID name the notifier subscriber and
	// destination (e-mail, webhook), shared by the subscriptions of one core.
	SubscriberID  string `json:"subscriber_id,omitempty"`
	DestinationID string `json:"destination_id,omitempty"`
	// Confirmed: the notifier destination is active (always for log). Read
	// from the notifier, never stored for e-mail and webhook.
	Confirmed bool      `json:"confirmed"`
	Added     time.Time `json:"added"`
	// Secret signs webhook deliveries (the notifier destination's); shown
	// only when the notifier destination is created.
	Secret string `json:"secret,omitempty"`
}

// key is the key of its subscribable (SubscribableKey).
func (s Subscription) key() string { return SubscribableKey(s.Tenant, s.Subscribable) }

// Public returns the subscription without its secret: what the API shows.
func (s Subscription) Public() Subscription {
	s.Secret = ""
	return s
}
