package notifier

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/dropstream/dropstream/internal/egress"
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

// WebhookConfig configures the webhook channel. Zero fields take defaults.
type WebhookConfig struct {
	// Timeout bounds one request and its answer. Default 5s.
	Timeout time.Duration
	// MaxResponseBytes bounds the answer read (and dropped). Default 64 KiB.
	MaxResponseBytes int64
	// UserAgent is the User-Agent header. Default "dropstream-webhook/1".
	UserAgent string
	// Egress is the policy of receivers' addresses. Default egress.Default().
	Egress *egress.Policy
	// Transport sends the requests and must keep to an egress policy.
	// Default: Egress's, with 4096 idle connections.
	Transport http.RoundTripper
	// Propagator writes the trace context. Default propagation.TraceContext{}.
	Propagator propagation.TextMapPropagator
	// Now is the clock of the signature timestamp. Default time.Now.
	Now func() time.Time
	// LegacySignature also sends the X-Dropstream headers. Default off.
	LegacySignature bool
}

// WithDefaults returns c with every zero field set to its default.
func (c WebhookConfig) WithDefaults() WebhookConfig {
	c.Timeout = cmp.Or(c.Timeout, DefaultWebhookTimeout)
	c.MaxResponseBytes = cmp.Or(c.MaxResponseBytes, DefaultMaxResponseBytes)
	c.UserAgent = cmp.Or(c.UserAgent, DefaultUserAgent)
	c.Egress = cmp.Or(c.Egress, egress.Default())
	if c.Transport == nil {
		t := c.Egress.Transport()
		// The pool holds every send in flight: past it, Go's transport may
		// fail a request the receiver did get, and its retry is a duplicate.
		t.MaxIdleConns = maxIdleConns
		t.MaxIdleConnsPerHost = maxIdleConns
		// The answer is dropped: no Accept-Encoding, no gzip reader.
		t.DisableCompression = true
		c.Transport = t
	}
	c.Propagator = cmp.Or[propagation.TextMapPropagator](c.Propagator, propagation.TraceContext{})
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
	cfg WebhookConfig
}

// NewWebhookChannel returns the "webhook" channel: Send POSTs the body to
// the address with Standard Webhooks headers, following no redirect. 2xx
// delivers; 408, 429, 5xx and network errors are retryable; the rest are
// permanent. Errors wrap a *DeliveryError.
func NewWebhookChannel(cfg WebhookConfig) (*WebhookChannel, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &WebhookChannel{cfg: cfg}, nil
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
	// Canonical keys, set directly: Header.Set canonicalizes each, per send;
	// the values share one array.
	now := w.cfg.Now()
	vals := [...]string{"application/json", w.cfg.UserAgent, n.EventID, strconv.FormatInt(now.Unix(), 10),
		string(appendStandard(make([]byte, 0, 48), n.Recipient.Secret, n.EventID, n.Body, now))}
	req.Header = make(http.Header, 8)
	for i, k := range [...]string{"Content-Type", "User-Agent", HeaderWebhookID, HeaderWebhookTimestamp, HeaderWebhookSignature} {
		req.Header[k] = vals[i : i+1 : i+1]
	}
	if w.cfg.LegacySignature {
		req.Header[HeaderEventID] = []string{n.EventID}
		req.Header[HeaderSignature] = []string{Sign(n.Recipient.Secret, n.Body, now)}
	}
	if u := req.URL.User; u != nil {
		// Credentials in the URL, as http.Client sends them.
		pass, _ := u.Password()
		req.SetBasicAuth(u.Username(), pass)
	}
	w.cfg.Propagator.Inject(ctx, traceCarrier(req.Header))
	// One round trip, following no redirect.
	resp, err := w.cfg.Transport.RoundTrip(req)
	if err != nil {
		err = &url.Error{Op: "Post", URL: n.Recipient.Address, Err: err}
		class := egress.Classify(err)
		if class == egress.ClassDenied {
			return stream.Permanent(&DeliveryError{Channel: ChannelWebhook, Class: class, Err: err})
		}
		return &DeliveryError{Channel: ChannelWebhook, Class: class, Retryable: true, Err: err}
	}
	defer resp.Body.Close()
	code := resp.StatusCode
	if code >= 200 && code < 300 {
		// Delivered; reading the body lets the connection be reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, w.cfg.MaxResponseBytes))
		return nil
	}
	// The answer is read for the connection's reuse, and dropped.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, w.cfg.MaxResponseBytes))
	class := egress.Classify(egress.Status(code))
	if code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500 {
		var after time.Duration
		detail := ""
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			if after, _ = throttle.ParseRetryAfter(ra, w.cfg.Now()); after > 0 {
				detail = "retry after " + after.String()
			}
		}
		return &DeliveryError{Channel: ChannelWebhook, StatusCode: code, Class: class, Retryable: true, Detail: detail, RetryAfter: after}
	}
	return stream.Permanent(&DeliveryError{Channel: ChannelWebhook, StatusCode: code, Class: class})
}

// traceCarrier is propagation.HeaderCarrier writing the trace context's
// headers under their canonical keys without canonicalizing them per send.
type traceCarrier http.Header

func (c traceCarrier) Get(key string) string { return http.Header(c).Get(key) }

func (c traceCarrier) Set(key, value string) {
	switch key {
	case "traceparent":
		c["Traceparent"] = []string{value}
	case "tracestate":
		c["Tracestate"] = []string{value}
	default:
		http.Header(c).Set(key, value)
	}
}

func (c traceCarrier) Keys() []string { return propagation.HeaderCarrier(c).Keys() }
