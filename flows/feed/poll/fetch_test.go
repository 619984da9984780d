package poll

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dropstream/dropstream/internal/egress"
	"github.com/dropstream/dropstream/internal/egress/egresstest"
)

// newFetcher returns a fetcher of cfg that may reach the test's servers on
// loopback, unless cfg sets its own policy.
func newFetcher(t *testing.T, cfg Config) *Fetcher {
	t.Helper()
	if cfg.Egress == nil {
		cfg.Egress = egresstest.Loopback(t)
	}
	if cfg.RatePerHost == 0 {
		cfg.RatePerHost, cfg.Burst = 1000, 100
	}
	f, err := NewFetcher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestFetch_conditionalGETAndGzip(t *testing.T) {
	var gz, conditional atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("If-None-Match") == `"v1"` && r.Header.Get("If-Modified-Since") == "Mon, 02 Mar 2026 09:00:00 GMT" {
			conditional.Add(1)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("Last-Modified", "Mon, 02 Mar 2026 09:00:00 GMT")
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			gz.Add(1)
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			_, _ = zw.Write([]byte(rss20))
			_ = zw.Close()
			return
		}
		_, _ = w.Write([]byte(rss20))
	}))
	defer srv.Close()
	f := newFetcher(t, Config{})
	r1, err := f.Fetch(t.Context(), srv.URL, Validators{})
	if err != nil || r1.NotModified || string(r1.Body) != rss20 || gz.Load() != 1 {
		t.Fatalf("first fetch: %v, not modified %v, body %d bytes, gzip answers %d", err, r1.NotModified, len(r1.Body), gz.Load())
	}
	want := Validators{ETag: `"v1"`, LastModified: "Mon, 02 Mar 2026 09:00:00 GMT"}
	if r1.Validators != want {
		t.Fatalf("validators %+v, want %+v", r1.Validators, want)
	}
	r2, err := f.Fetch(t.Context(), srv.URL, r1.Validators)
	if err != nil || !r2.NotModified || len(r2.Body) != 0 || r2.Validators != want || conditional.Load() != 1 {
		t.Fatalf("conditional fetch: %v %+v, conditional answers %d", err, r2, conditional.Load())
	}
}

func TestFetch_failures(t *testing.T) {
	big := bytes.Repeat([]byte("a"), 8<<10)
	var gzBomb bytes.Buffer
	zw := gzip.NewWriter(&gzBomb)
	_, _ = zw.Write(bytes.Repeat([]byte("a"), 1<<20))
	_ = zw.Close()
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    error
		class   egress.Class
	}{
		{"oversize", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(big) }, ErrTooLarge, egress.ClassTooLarge},
		{"oversize once decompressed", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write(gzBomb.Bytes())
		}, ErrTooLarge, egress.ClassTooLarge},
		{"redirect loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, r.URL.Path, http.StatusFound) }, ErrTooManyRedirects, ""},
		{"slow", func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		}, ErrTimeout, egress.ClassTimeout},
		{"slow body", func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte("<rss>"))
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		}, ErrTimeout, egress.ClassTimeout},
		{"server error", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusInternalServerError) }, ErrStatus, egress.ClassHTTP5xx},
		{"throttled", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		}, ErrThrottled, egress.ClassHTTP4xx},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			f := newFetcher(t, Config{MaxBodyBytes: 4 << 10, Timeout: 300 * time.Millisecond, MaxRedirects: 3})
			_, err := f.Fetch(t.Context(), srv.URL+"/feed", Validators{})
			if !errors.Is(err, tt.want) {
				t.Fatalf("Fetch: %v, want %v", err, tt.want)
			}
			if tt.class != "" && egress.Classify(err) != tt.class {
				t.Errorf("Fetch: %v of class %q, want %q", err, egress.Classify(err), tt.class)
			}
		})
	}
}

func TestFetch_followsABoundedNumberOfRedirects(t *testing.T) {
	var hops atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n := hops.Add(1); n <= 2 {
			http.Redirect(w, r, "/next", http.StatusMovedPermanently)
			return
		}
		_, _ = w.Write([]byte(atom))
	}))
	defer srv.Close()
	r, err := newFetcher(t, Config{MaxRedirects: 2}).Fetch(t.Context(), srv.URL+"/start", Validators{})
	if err != nil || !strings.HasSuffix(r.FinalURL, "/next") || hops.Load() != 3 {
		t.Fatalf("Fetch: %v, final %q after %d requests", err, r.FinalURL, hops.Load())
	}
}

func TestFetch_throttlingPausesTheHost(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(rss20))
	}))
	defer srv.Close()
	f := newFetcher(t, Config{})
	_, err := f.Fetch(t.Context(), srv.URL, Validators{})
	var th *Throttled
	if !errors.As(err, &th) || th.RetryAfter != time.Second || th.Status != http.StatusServiceUnavailable {
		t.Fatalf("first fetch: %v, want Throttled 503 after 1s", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, err := f.Fetch(ctx, srv.URL, Validators{}); !errors.Is(err, context.DeadlineExceeded) || calls.Load() != 1 {
		t.Fatalf("fetch during the pause: %v after %d requests, want it held back", err, calls.Load())
	}
	start := time.Now()
	if _, err := f.Fetch(t.Context(), srv.URL, Validators{}); err != nil || calls.Load() != 2 {
		t.Fatalf("fetch after the pause: %v, %d requests", err, calls.Load())
	}
	if time.Since(start) < 500*time.Millisecond {
		t.Errorf("the fetch after a Retry-After of 1s went out at once")
	}
}

func TestFetch_rejectsBadURLs(t *testing.T) {
	f := newFetcher(t, Config{})
	for _, u := range []string{"", "file:///etc/passwd", "ftp://example.org/x", "http://"} {
		if _, err := f.Fetch(t.Context(), u, Validators{}); err == nil {
			t.Errorf("Fetch(%q) succeeded", u)
		}
	}
}

func TestConfig_Validate(t *testing.T) {
	bad := []Config{{Timeout: time.Nanosecond}, {MaxBodyBytes: 10}, {MaxRedirects: 50}, {RatePerHost: -1}, {DefaultRetryAfter: 2 * time.Hour}}
	for _, c := range bad {
		if err := c.WithDefaults().Validate(); err == nil {
			t.Errorf("%+v validated", c)
		}
	}
	if err := (Config{}).WithDefaults().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

// The default policy fetches nothing on loopback, nor follows a redirect
// from an allowed server to a denied address.
func TestFetch_egressPolicy(t *testing.T) {
	reached := false
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached = true }))
	defer internal.Close()
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://[::ffff:127.0.0.1]:"+internal.URL[strings.LastIndex(internal.URL, ":")+1:]+"/feed", http.StatusFound)
	}))
	defer redirecting.Close()
	for name, tc := range map[string]struct {
		policy *egress.Policy
		url    string
	}{
		"default policy, loopback feed":        {egress.Default(), internal.URL + "/feed"},
		"allowed server redirecting to denied": {egresstest.Allow(t, redirecting.URL), redirecting.URL + "/feed"},
	} {
		_, err := newFetcher(t, Config{Egress: tc.policy}).Fetch(t.Context(), tc.url, Validators{})
		if !errors.Is(err, egress.ErrDenied) || egress.Classify(err) != egress.ClassDenied {
			t.Errorf("%s: Fetch = %v, want ErrDenied", name, err)
		}
	}
	if reached {
		t.Error("the loopback server was reached")
	}
}
