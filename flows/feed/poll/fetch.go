package poll

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/dropstream/dropstream/internal/egress"
	"github.com/dropstream/dropstream/internal/ratelimit"
	"github.com/dropstream/dropstream/internal/settings"
	"github.com/dropstream/dropstream/internal/tick"
)

// Errors of Fetch, for errors.Is.
var (
	// ErrTooLarge: the body, decompressed, exceeds Config.MaxBodyBytes.
	ErrTooLarge = fmt.Errorf("poll: feed body: %w", egress.ErrTooLarge)
	// ErrTimeout: no complete answer within Config.Timeout.
	ErrTimeout = errors.New("poll: feed fetch timed out")
	// ErrTooManyRedirects: more than Config.MaxRedirects redirects.
	ErrTooManyRedirects = errors.New("poll: too many redirects")
	// ErrThrottled: the server answered 429 or 503; see Throttled.
	ErrThrottled = errors.New("poll: throttled by the server")
	// ErrStatus: the server answered another non-2xx status (the error
	// wraps an *egress.StatusError too).
	ErrStatus = errors.New("poll: unexpected HTTP status")
	// ErrGone: the server answered 410 Gone, the feed is no more (the
	// error wraps ErrStatus too).
	ErrGone = fmt.Errorf("%w: 410 gone", ErrStatus)
)

// HostGate spaces the requests to one host, across every process that
// fetches feeds (package pollgate's Pacer over Redis).
type HostGate interface {
	// Wait returns when a request to host may go, or ctx's error.
	Wait(ctx context.Context, host string) error
}

// Config configures a Fetcher. Zero fields take their defaults.
type Config struct {
	// Timeout bounds one fetch, redirects and body included. Default 15s.
	Timeout time.Duration `default:"15s" range:"10ms..10m"`
	// MaxBodyBytes bounds the decompressed body. Default 4 MiB.
	MaxBodyBytes int64 `default:"4MiB" range:"1KiB..64MiB"`
	// MaxRedirects bounds the redirects followed. Default 5.
	MaxRedirects int `default:"5" range:"0..20"`
	// UserAgent is sent with every request. Default "dropstream-feed/1".
	UserAgent string `default:"dropstream-feed/1"`
	// RatePerHost is the requests per second allowed to one host, at
	// least 0.001. Default 5.
	RatePerHost float64 `default:"5" range:"0.001.."`
	// Burst is how many requests to one host may go at once. Default 5.
	Burst int `default:"5" range:"1.."`
	// DefaultRetryAfter is the pause after a 429/503 without a readable
	// Retry-After. Default 60s.
	DefaultRetryAfter time.Duration `default:"1m" range:"1ns.."`
	// MaxRetryAfter caps the pause a server may ask for. Default 1h.
	MaxRetryAfter time.Duration `default:"1h" range:"DefaultRetryAfter.."`
	// Egress is the policy of feed addresses; a denied one is not fetched.
	// Default: egress.Default().
	Egress *egress.Policy
	// Transport sends the requests; one set here must enforce an egress
	// policy itself. Default: Egress's transport.
	Transport http.RoundTripper
	// HostGate, when set, spaces requests to each host across the fetchers
	// sharing it. Default none.
	HostGate HostGate
	// Now is the clock the cache headers are read against. Default
	// time.Now.
	Now func() time.Time
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	settings.Defaults(&c)
	c.Egress = cmp.Or(c.Egress, egress.Default())
	if c.Transport == nil {
		c.Transport = c.Egress.Transport()
	}
	c.Now = tick.Or(c.Now)
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c Config) Validate() error {
	return settings.Check("poll", &c)
}

// Validators are the cache validators of a previous answer, sent back as
// If-None-Match and If-Modified-Since.
type Validators struct {
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"last_modified,omitempty"`
}

// Response is a successful fetch.
type Response struct {
	// NotModified is true for a 304: Body is empty and the feed unchanged.
	NotModified bool
	Body        []byte
	// Validators are those of this answer (those sent, on a 304 without
	// its own).
	Validators Validators
	// FinalURL is the URL after redirects.
	FinalURL string
	// MovedTo is where a chain of only permanent redirects (301, 308) ends;
	// empty otherwise.
	MovedTo string
	// Status is the HTTP status of the answer (200, 304).
	Status int
	// Bytes is the size of the body read (decompressed).
	Bytes int64
	// Hints are the answer's freshness and WebSub links; the caller merges
	// the document's (Hints.Merge).
	Hints Hints
}

// redirects records the redirects of one fetch (in its request's context).
type redirects struct {
	moved     string
	permanent bool
}

type redirectsKey struct{}

// Throttled is the error of a 429 or 503: the host is paused for RetryAfter.
type Throttled struct {
	Status     int
	RetryAfter time.Duration
}

func (e *Throttled) Error() string {
	return fmt.Sprintf("poll: HTTP %d, retry after %s", e.Status, e.RetryAfter)
}

// Unwrap makes errors.Is(err, ErrThrottled) true, and finds the status as
// an *egress.StatusError.
func (e *Throttled) Unwrap() []error { return []error{ErrThrottled, egress.Status(e.Status)} }

// Fetcher fetches feeds. It is safe for concurrent use.
type Fetcher struct {
	cfg    Config
	client *http.Client
	mu     sync.Mutex
	hosts  map[string]*ratelimit.Bucket
}

// NewFetcher returns a fetcher; cfg is defaulted and validated.
func NewFetcher(cfg Config) (*Fetcher, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	f := &Fetcher{cfg: cfg, hosts: map[string]*ratelimit.Bucket{}}
	f.client = &http.Client{Transport: cfg.Transport, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) > cfg.MaxRedirects {
			return fmt.Errorf("%w: more than %d", ErrTooManyRedirects, cfg.MaxRedirects)
		}
		if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
			return fmt.Errorf("poll: redirect to scheme %q refused", req.URL.Scheme)
		}
		if rd, ok := req.Context().Value(redirectsKey{}).(*redirects); ok {
			if st := req.Response; rd.permanent && st != nil && (st.StatusCode == http.StatusMovedPermanently || st.StatusCode == http.StatusPermanentRedirect) {
				rd.moved = req.URL.String()
			} else {
				rd.permanent = false
			}
		}
		return cfg.Egress.CheckRedirect(req)
	}}
	return f, nil
}

// Fetch waits for the host's turn, then GETs rawURL conditionally on v.
// Errors: ErrTimeout, ErrTooLarge, ErrTooManyRedirects, *Throttled,
// ErrStatus or a transport error; a failure never looks like an empty feed.
func (f *Fetcher) Fetch(ctx context.Context, rawURL string, v Validators) (Response, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Response{}, fmt.Errorf("poll: bad feed URL %q", validText(rawURL, 200))
	}
	b := f.bucket(u.Host)
	if err := b.Wait(ctx); err != nil {
		return Response{}, err
	}
	if f.cfg.HostGate != nil {
		if err := f.cfg.HostGate.Wait(ctx, strings.ToLower(u.Host)); err != nil {
			return Response{}, fmt.Errorf("poll: host gate: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	rd := &redirects{permanent: true}
	ctx = context.WithValue(ctx, redirectsKey{}, rd)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return Response{}, fmt.Errorf("poll: %w", err)
	}
	req.Header.Set("User-Agent", f.cfg.UserAgent)
	req.Header.Set("Accept", "application/rss+xml, application/atom+xml, application/xml;q=0.9, text/xml;q=0.8, */*;q=0.5")
	if v.ETag != "" {
		req.Header.Set("If-None-Match", v.ETag)
	}
	if v.LastModified != "" {
		req.Header.Set("If-Modified-Since", v.LastModified)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return Response{}, f.transportError(ctx, err)
	}
	defer resp.Body.Close()
	out := Response{FinalURL: resp.Request.URL.String(), Status: resp.StatusCode, Validators: Validators{
		ETag: validText(resp.Header.Get("ETag"), 256), LastModified: validText(resp.Header.Get("Last-Modified"), 64)}}
	out.Hints.FreshFor = cacheHints(resp.Header, f.cfg.Now())
	linkHeaderHints(resp.Header, &out.Hints)
	if rd.permanent && rd.moved != "" {
		out.MovedTo = validText(rd.moved, MaxLinkBytes)
	}
	switch {
	case resp.StatusCode == http.StatusNotModified:
		out.NotModified = true
		if out.Validators == (Validators{}) {
			out.Validators = v
		}
		return out, nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable:
		d, ok := ratelimit.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now(), f.cfg.MaxRetryAfter)
		if !ok {
			d = f.cfg.DefaultRetryAfter
		}
		b.Pause(time.Now().Add(d))
		return Response{}, &Throttled{Status: resp.StatusCode, RetryAfter: d}
	case resp.StatusCode == http.StatusGone:
		return Response{}, fmt.Errorf("%w: %w", ErrGone, egress.Status(resp.StatusCode))
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return Response{}, fmt.Errorf("%w: %w", ErrStatus, egress.Status(resp.StatusCode))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, f.cfg.MaxBodyBytes+1))
	if err != nil {
		return Response{}, f.transportError(ctx, fmt.Errorf("read body: %w", err))
	}
	if int64(len(body)) > f.cfg.MaxBodyBytes {
		return Response{}, fmt.Errorf("%w: over %d bytes", ErrTooLarge, f.cfg.MaxBodyBytes)
	}
	out.Body, out.Bytes = body, int64(len(body))
	return out, nil
}

func (f *Fetcher) transportError(ctx context.Context, err error) error {
	if errors.Is(err, ErrTooManyRedirects) {
		return err
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w after %s: %w", ErrTimeout, f.cfg.Timeout, err)
	}
	return fmt.Errorf("poll: %w", err)
}

// bucket returns the politeness bucket of a host.
func (f *Fetcher) bucket(host string) *ratelimit.Bucket {
	host = strings.ToLower(host)
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.hosts[host]
	if !ok {
		b = ratelimit.NewBucket(f.cfg.RatePerHost, f.cfg.Burst)
		f.hosts[host] = b
	}
	return b
}
