package notifier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/notifier/throttle"
	"github.com/dropstream/dropstream/stream"
)

// Defaults of WebhookConfig.
const (
	DefaultWebhookTimeout   = 5 * time.Second
	DefaultMaxResponseBytes = 64 << 10
	DefaultUserAgent        = "dropstream-webhook/1"
)

// maxIdleConns is the default transport's idle pool, in all and per host.
const maxIdleConns = 4096

// maxDetail bounds the excerpt of a response kept in a DeliveryError.
const maxDetail = 256

// WebhookConfig configures the webhook channel. Zero fields take their
// defaults.
type WebhookConfig struct {
	// Timeout bounds one request, connection and response included.
	// Default 5s.
	Timeout time.Duration
	// MaxResponseBytes bounds how much of a response body is read (and
	// discarded, but for a short excerpt kept on errors). Default 64 KiB.
	MaxResponseBytes int64
	// UserAgent is the User-Agent header. Default "dropstream-webhook/1".
	UserAgent string
	// Transport sends the requests. Default: a clone of
	// http.DefaultTransport keeping up to 4096 idle connections, all of
	// them to one host if need be.
	Transport http.RoundTripper
	// Propagator writes the trace context into the request headers.
	// Default propagation.TraceContext{}.
	Propagator propagation.TextMapPropagator
	// Now is the clock of the signature timestamp. Default time.Now.
	Now func() time.Time
}

// WithDefaults returns c with every zero field set to its default.
func (c WebhookConfig) WithDefaults() WebhookConfig {
	if c.Timeout == 0 {
		c.Timeout = DefaultWebhookTimeout
	}
	if c.MaxResponseBytes == 0 {
		c.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if c.UserAgent == "" {
		c.UserAgent = DefaultUserAgent
	}
	if c.Transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		// Many sends in flight to one receiver reuse their connections
		// instead of opening (and leaving in TIME_WAIT) one per send. The
		// pool must hold every send in flight (the stages' partitions ×
		// their concurrency): past MaxIdleConns, Go's transport may fail a
		// request the receiver did get ("putIdleConn: too many idle
		// connections"), and its retry is a duplicate.
		t.MaxIdleConns = maxIdleConns
		t.MaxIdleConnsPerHost = maxIdleConns
		c.Transport = t
	}
	if c.Propagator == nil {
		c.Propagator = propagation.TraceContext{}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c WebhookConfig) Validate() error {
	var errs []error
	if c.Timeout < time.Millisecond || c.Timeout > 5*time.Minute {
		errs = append(errs, fmt.Errorf("notifier: webhook timeout %s out of range 1ms..5m", c.Timeout))
	}
	if c.MaxResponseBytes < 1 || c.MaxResponseBytes > 16<<20 {
		errs = append(errs, fmt.Errorf("notifier: webhook max response bytes %d out of range 1..16MiB", c.MaxResponseBytes))
	}
	return errors.Join(errs...)
}

// WebhookChannel posts notifications as signed JSON to the recipient's URL.
type WebhookChannel struct {
	cfg    WebhookConfig
	client *http.Client
}

// NewWebhookChannel returns the "webhook" channel.
//
// Each Send is one POST of Notification.Body to Recipient.Address with
// Content-Type application/json, X-Dropstream-Event-Id, the W3C trace
// context, and X-Dropstream-Signature (see Sign) keyed with
// Recipient.Secret. Redirects are not followed. A 2xx answer is a delivery;
// 408, 429, 5xx, a network error or a timeout are retryable errors; any
// other answer (3xx, other 4xx) is a permanent error (stream.Permanent).
// Errors wrap a *DeliveryError.
func NewWebhookChannel(cfg WebhookConfig) (*WebhookChannel, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	client := &http.Client{
		Transport: cfg.Transport,
		Timeout:   cfg.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	return &WebhookChannel{cfg: cfg, client: client}, nil
}

// Name returns ChannelWebhook.
func (w *WebhookChannel) Name() string { return ChannelWebhook }

// Send posts n; see NewWebhookChannel.
func (w *WebhookChannel) Send(ctx context.Context, n Notification) error {
	if n.Recipient.Address == "" || n.Recipient.Secret == "" {
		return stream.Permanent(&DeliveryError{Channel: ChannelWebhook, Detail: "recipient has no URL or secret"})
	}
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.Recipient.Address, bytes.NewReader(n.Body))
	if err != nil {
		return stream.Permanent(&DeliveryError{Channel: ChannelWebhook, Detail: "bad request", Err: err})
	}
	// Canonical keys, set directly: Header.Set canonicalizes each, per send.
	req.Header = http.Header{
		"Content-Type":  {"application/json"},
		"User-Agent":    {w.cfg.UserAgent},
		HeaderEventID:   {n.EventID},
		HeaderSignature: {Sign(n.Recipient.Secret, n.Body, w.cfg.Now())},
	}
	w.cfg.Propagator.Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := w.client.Do(req)
	if err != nil {
		return &DeliveryError{Channel: ChannelWebhook, Retryable: true, Err: err}
	}
	defer resp.Body.Close()
	code := resp.StatusCode
	if code >= 200 && code < 300 {
		// Delivered, even if the body cannot be read to its end; reading
		// it lets the connection be reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, w.cfg.MaxResponseBytes))
		return nil
	}
	detail, readErr := w.drain(resp.Body)
	if code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500 {
		var after time.Duration
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			detail = strings.TrimSpace("retry-after " + clip.Marked(ra, maxQuoted) + " " + detail)
			after, _ = throttle.ParseRetryAfter(ra, w.cfg.Now())
		}
		return &DeliveryError{Channel: ChannelWebhook, StatusCode: code, Retryable: true, Detail: detail, Err: readErr, RetryAfter: after}
	}
	return stream.Permanent(&DeliveryError{Channel: ChannelWebhook, StatusCode: code, Detail: detail, Err: readErr})
}

// drain reads at most MaxResponseBytes of a response body and returns a
// printable excerpt of its beginning.
func (w *WebhookChannel) drain(body io.Reader) (string, error) {
	var head bytes.Buffer
	lr := io.LimitReader(body, w.cfg.MaxResponseBytes)
	_, err := io.CopyN(&head, lr, maxDetail)
	if err == nil {
		_, err = io.Copy(io.Discard, lr)
	}
	if errors.Is(err, io.EOF) {
		err = nil
	}
	detail := strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(head.String(), ""))
	return strings.TrimSpace(detail), err
}
