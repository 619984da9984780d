package egress_test

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"syscall"
	"testing"

	"github.com/dropstream/dropstream/internal/egress"
	"github.com/dropstream/dropstream/internal/egress/egresstest"
)

func TestClassify_sortsFailuresIntoClasses(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want egress.Class
	}{
		{"nil", nil, egress.ClassNone},
		{"denied", fmt.Errorf("get: %w", &egress.DeniedError{Addr: netip.MustParseAddr("127.0.0.1"), Range: "loopback"}), egress.ClassDenied},
		{"404", fmt.Errorf("wrapped: %w", egress.Status(404)), egress.ClassHTTP4xx},
		{"429", egress.Status(429), egress.ClassHTTP4xx},
		{"500", egress.Status(500), egress.ClassHTTP5xx},
		{"503", egress.Status(503), egress.ClassHTTP5xx},
		{"302", egress.Status(302), egress.ClassHTTPStatus},
		{"smtp 452", &egress.StatusError{Code: 452, SMTP: true}, egress.ClassSMTP4xx},
		{"smtp 550", &egress.StatusError{Code: 550, SMTP: true}, egress.ClassSMTP5xx},
		{"deadline", fmt.Errorf("poll: %w", context.DeadlineExceeded), egress.ClassTimeout},
		{"net timeout", &net.OpError{Op: "dial", Err: os.ErrDeadlineExceeded}, egress.ClassTimeout},
		{"dns", &net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "nope.example", IsNotFound: true}}, egress.ClassDNS},
		{"refused", &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, egress.ClassRefused},
		{"reset", &net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, egress.ClassRefused},
		{"tls", fmt.Errorf("get: %w", x509.UnknownAuthorityError{}), egress.ClassTLS},
		{"malformed", fmt.Errorf("parse: %w", egress.ErrMalformed), egress.ClassMalformed},
		{"too large", fmt.Errorf("body: %w", egress.ErrTooLarge), egress.ClassTooLarge},
		{"other network", &net.OpError{Op: "write", Err: errors.New("broken pipe")}, egress.ClassNetwork},
		{"other", errors.New("something"), egress.ClassOther},
	} {
		if got := egress.Classify(tc.err); got != tc.want {
			t.Errorf("%s: Classify(%v) = %q, want %q", tc.name, tc.err, got, tc.want)
		}
	}
}

// Real exchanges: a refused connection, an untrusted certificate.
func TestClassify_realFailures(t *testing.T) {
	tlsSrv := httptest.NewTLSServer(http.NotFoundHandler())
	defer tlsSrv.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	allow, err := egress.New(egress.Config{Allow: []string{"127.0.0.0/8"}})
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: allow.Transport()}
	for url, want := range map[string]egress.Class{tlsSrv.URL: egress.ClassTLS, closedURL: egress.ClassRefused} {
		resp, err := c.Get(url)
		if err == nil {
			_ = resp.Body.Close()
		}
		if got := egress.Classify(err); got != want {
			t.Errorf("GET %s: %v of class %q, want %q", url, err, got, want)
		}
	}
}

// Describe keeps the class and a status's code: never the error's text,
// which may quote a peer's banner or a redirect's target.
func TestDescribe_classAndStatusOnly(t *testing.T) {
	redirected := egresstest.RedirectServer(t, "http://10.0.0.1/private")
	c := &http.Client{Transport: egresstest.Loopback(t).Transport(), CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		return egresstest.Loopback(t).CheckRedirect(req)
	}}
	get := func(url string) error {
		resp, err := c.Get(url)
		if err == nil {
			_ = resp.Body.Close()
		}
		return err
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"a status", fmt.Errorf("poll: %w", egress.Status(500)), "http_5xx: HTTP 500"},
		{"an SMTP reply", fmt.Errorf("send: %w", &egress.StatusError{Code: 550, SMTP: true}), "smtp_5xx: SMTP 550"},
		{"a banner read as a status line", get(egresstest.BannerServer(t)), "network"},
		{"a redirect to a denied address", get(redirected), "denied"},
		{"a malformed answer", fmt.Errorf("%w: <html>secret", egress.ErrMalformed), "malformed"},
		{"none", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := egress.Describe(tc.err); got != tc.want {
				t.Errorf("Describe(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
}
