package notifier

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/propagation"

	"github.com/dropstream/dropstream/internal/egress"
	"github.com/dropstream/dropstream/internal/ratelimit"
	"github.com/dropstream/dropstream/internal/settings"
	"github.com/dropstream/dropstream/internal/tick"
	"github.com/dropstream/dropstream/notifier/channel"
	"github.com/dropstream/dropstream/stream"
)

// maxConns bounds the connections to one receiver: above every send in
// flight (DeliverConfig.MaxInFlight), so none waits for another's.
const maxConns = 4096

// maxIdle is how long an idle connection is kept: below the shortest
// keep-alive common servers use (5s), so none is reused once its server
// closed it.
const maxIdle = 4 * time.Second

// WebhookConfig configures the webhook channel. Zero fields take defaults.
type WebhookConfig struct {
	// Timeout bounds one request and its answer. Default 5s.
	Timeout time.Duration `default:"5s" range:"1ms..5m"`
	// MaxResponseBytes bounds the answer read (and dropped). Default 64 KiB.
	MaxResponseBytes int64 `default:"64KiB" range:"1..16MiB"`
	// UserAgent is the User-Agent header. Default "dropstream-webhook/1".
	UserAgent string `default:"dropstream-webhook/1"`
	// Egress is the policy of receivers' addresses. Default egress.Default().
	Egress *egress.Policy
	// Propagator writes the trace context. Default propagation.TraceContext{}.
	Propagator propagation.TextMapPropagator
	// Now is the clock of the signature timestamp. Default time.Now.
	Now func() time.Time
	// LegacySignature also sends the X-Dropstream headers. Default off.
	LegacySignature bool
}

// WithDefaults returns c with every zero field set to its default.
func (c WebhookConfig) WithDefaults() WebhookConfig {
	settings.Defaults(&c)
	c.Egress = cmp.Or(c.Egress, egress.Default())
	c.Propagator = cmp.Or[propagation.TextMapPropagator](c.Propagator, propagation.TraceContext{})
	c.Now = tick.Or(c.Now)
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c WebhookConfig) Validate() error {
	return settings.Check("notifier: webhook", &c)
}

// WebhookChannel posts notifications as signed JSON to the recipient's URL.
type WebhookChannel struct {
	cfg    WebhookConfig
	client *fasthttp.Client
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
	// fasthttp: net/http's client, its connection goroutines and their
	// hand-offs were a tenth to a fifth of a delivery's CPU and a quarter
	// of its allocations (BENCHMARKS.md, "Notifier: webhooks over fasthttp").
	// Every connection dials through the egress policy; an answer's body
	// is streamed past its first byte, so a 2xx whose body stalls still
	// delivers, and the read stays bounded. Errors quote no answer.
	policy := cfg.Egress
	client := &fasthttp.Client{Dial: func(addr string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
		defer cancel()
		return policy.DialContext(ctx, "tcp", addr)
	}, MaxConnsPerHost: maxConns, MaxConnWaitTimeout: cfg.Timeout, MaxIdemponentCallAttempts: 1, StreamResponseBody: true,
		MaxResponseBodySize: 1, NoDefaultUserAgentHeader: true, DisablePathNormalizing: true, MaxIdleConnDuration: maxIdle,
		ConfigureClient: func(hc *fasthttp.HostClient) error {
			hc.SecureErrorLogMessage = true
			return nil
		}}
	return &WebhookChannel{cfg: cfg, client: client}, nil
}

// Name returns ChannelWebhook.
func (w *WebhookChannel) Name() string { return ChannelWebhook }

// Send posts n; see NewWebhookChannel.
func (w *WebhookChannel) Send(ctx context.Context, n Notification) error {
	if n.Recipient.Address == "" || n.Recipient.Secret == "" {
		return stream.Permanent(&DeliveryError{Channel: ChannelWebhook, Detail: "recipient has no URL or secret"})
	}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(n.Recipient.Address)
	if u := req.URI(); len(u.Host()) == 0 || !bytes.Equal(u.Scheme(), []byte("http")) && !bytes.Equal(u.Scheme(), []byte("https")) {
		return stream.Permanent(&DeliveryError{Channel: ChannelWebhook, Detail: "bad request: want an http or https URL"})
	}
	// Credentials in the URL go as basic auth (fasthttp writes them).
	now := w.cfg.Now()
	h := &req.Header
	h.SetMethod(fasthttp.MethodPost)
	h.SetContentType("application/json")
	h.SetUserAgent(w.cfg.UserAgent)
	h.Set(HeaderWebhookID, n.EventID)
	var buf [64]byte
	h.SetBytesV(HeaderWebhookTimestamp, strconv.AppendInt(buf[:0], now.Unix(), 10))
	h.SetBytesV(HeaderWebhookSignature, appendStandard(buf[:0], n.Recipient.Secret, n.EventID, n.Body, now))
	if w.cfg.LegacySignature {
		h.Set(HeaderEventID, n.EventID)
		h.Set(HeaderSignature, Sign(n.Recipient.Secret, n.Body, now))
	}
	w.cfg.Propagator.Inject(ctx, headerCarrier{h})
	req.SetBodyRaw(n.Body)
	deadline := time.Now().Add(w.cfg.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	// One round trip, following no redirect and retrying nothing.
	err := w.client.DoDeadline(req, resp, deadline)
	if errors.Is(err, fasthttp.ErrBodyTooLarge) {
		err = nil // an answer without length past the bound: its status was read
	}
	if err != nil {
		err = &url.Error{Op: "Post", URL: n.Recipient.Address, Err: err}
		class := egress.Classify(err)
		if class == egress.ClassDenied {
			return stream.Permanent(&DeliveryError{Channel: ChannelWebhook, Class: class, Err: err})
		}
		return &DeliveryError{Channel: ChannelWebhook, Class: class, Retryable: true, Err: err}
	}
	// The answer is read (up to the bound, until the deadline) for the
	// connection's reuse, and dropped; one not read to its end closes it.
	if body := resp.BodyStream(); body != nil {
		if n, err := io.CopyN(io.Discard, body, w.cfg.MaxResponseBytes+1); n > w.cfg.MaxResponseBytes || err != io.EOF {
			resp.SetConnectionClose()
		}
	}
	_ = resp.CloseBodyStream()
	code := resp.StatusCode()
	if code >= 200 && code < 300 {
		return nil
	}
	class := egress.Classify(egress.Status(code))
	if code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500 {
		var after time.Duration
		detail := ""
		if ra := resp.Header.Peek("Retry-After"); len(ra) > 0 {
			if after, _ = ratelimit.ParseRetryAfter(string(ra), w.cfg.Now(), 24*time.Hour); after > 0 {
				detail = "retry after " + after.String()
			}
		}
		return &DeliveryError{Channel: ChannelWebhook, StatusCode: code, Class: class, Retryable: true, Detail: detail, RetryAfter: after}
	}
	return stream.Permanent(&DeliveryError{Channel: ChannelWebhook, StatusCode: code, Class: class})
}

// headerCarrier carries the trace context in a fasthttp request's headers.
type headerCarrier struct{ h *fasthttp.RequestHeader }

func (c headerCarrier) Get(key string) string { return string(c.h.Peek(key)) }
func (c headerCarrier) Set(key, value string) { c.h.Set(key, value) }
func (c headerCarrier) Keys() []string {
	var keys []string
	c.h.VisitAll(func(k, _ []byte) { keys = append(keys, string(k)) })
	return keys
}

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
	lines := slices.DeleteFunc([]string{n.Title, n.Text}, func(l string) bool { return l == "" })
	if len(lines) == 0 {
		lines = append(lines, n.Event+": "+n.Subject)
	}
	if n.UnsubscribeURL != "" {
		lines = append(lines, "<"+n.UnsubscribeURL+"|Unsubscribe>")
	}
	n.Body, _ = json.Marshal(map[string]string{"text": strings.Join(lines, "\n")}) // a map of strings always encodes
	return s.wh.Send(ctx, n)
}

// Webhook headers: Standard Webhooks (https://www.standardwebhooks.com)
// always, X-Dropstream ones with WebhookConfig.LegacySignature.
const (
	// HeaderWebhookID carries the notification's id, to deduplicate on.
	HeaderWebhookID = "Webhook-Id"
	// HeaderWebhookTimestamp carries the send's Unix time in seconds.
	HeaderWebhookTimestamp = "Webhook-Timestamp"
	// HeaderWebhookSignature carries "v1,<base64 HMAC-SHA256 of
	// "<id>.<timestamp>.<body>">" (see appendStandard).
	HeaderWebhookSignature = "Webhook-Signature"
	// HeaderSignature carries "t=<unix seconds>,v1=<hex HMAC-SHA256 of
	// "<t>.<body>" keyed with the watcher's secret>".
	HeaderSignature = "X-Dropstream-Signature"
	// HeaderEventID carries the notification's event id.
	HeaderEventID = "X-Dropstream-Event-Id"
)

// signer is a hasher and buffers, pooled: crypto/hmac's two hashers and
// pads per key were a tenth of a send's allocations.
type signer struct {
	h        hash.Hash
	key, buf []byte
}

var signers = sync.Pool{New: func() any { return &signer{h: sha256.New()} }}

// appendStandard appends "v1,<base64 HMAC-SHA256 of "<id>.<unix>.<body>">"
// to dst; the HMAC is RFC 2104's H(key^opad || H(key^ipad || message)). The
// key is the base64 after "whsec_" for such secrets (as the spec's
// libraries), else the secret's bytes.
func appendStandard(dst []byte, secret, id string, body []byte, t time.Time) []byte {
	s := signers.Get().(*signer)
	defer signers.Put(s)
	s.key = append(s.key[:0], secret...)
	if rest, ok := strings.CutPrefix(secret, "whsec_"); ok {
		s.buf = append(s.buf[:0], rest...)
		if key, err := base64.StdEncoding.AppendDecode(s.key[:0], s.buf); err == nil && len(key) > 0 {
			s.key = key
		} else {
			s.key = append(s.key[:0], secret...)
		}
	}
	if len(s.key) > sha256.BlockSize {
		s.h.Reset()
		s.h.Write(s.key)
		s.key = s.h.Sum(s.key[:0])
	}
	s.buf = strconv.AppendInt(append(append(pad(s.buf[:0], s.key, 0x36), id...), '.'), t.Unix(), 10)
	s.h.Reset()
	s.h.Write(append(s.buf, '.'))
	s.h.Write(body)
	s.buf = s.h.Sum(pad(s.buf[:0], s.key, 0x5c))
	s.h.Reset()
	s.h.Write(s.buf)
	s.buf = s.h.Sum(s.buf[:0])
	return base64.StdEncoding.AppendEncode(append(dst, "v1,"...), s.buf)
}

// pad appends key, zero-filled to a block, XORed with x.
func pad(dst, key []byte, x byte) []byte {
	for i := range sha256.BlockSize {
		c := x
		if i < len(key) {
			c ^= key[i]
		}
		dst = append(dst, c)
	}
	return dst
}

// Sign returns the X-Dropstream-Signature value of body sent at t.
func Sign(secret string, body []byte, t time.Time) string {
	b := make([]byte, 0, len("t=,v1=")+20+hex.EncodedLen(sha256.Size))
	b = strconv.AppendInt(append(b, "t="...), t.Unix(), 10)
	h := hmac.New(sha256.New, []byte(secret))
	h.Write(append(b[len("t="):], '.'))
	h.Write(body)
	return string(hex.AppendEncode(append(b, ",v1="...), h.Sum(nil)))
}
