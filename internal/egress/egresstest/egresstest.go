// Package egresstest builds egress policies for tests, whose peers
// (httptest servers, the SMTP test server) listen on loopback, which the
// default policy denies.
package egresstest

import (
	"net"
	"net/url"
	"testing"

	"github.com/dropstream/dropstream/internal/egress"
)

// Loopback returns a policy allowing the loopback addresses (127.0.0.0/8,
// ::1) on any port, and denying every other denied range.
func Loopback(t testing.TB) *egress.Policy {
	t.Helper()
	return Allow(t, "127.0.0.0/8", "::1")
}

// Allow returns a policy allowing entries (see egress.Config.Allow); an
// entry that is a URL ("http://127.0.0.1:4312", an httptest server's URL)
// allows its host:port.
func Allow(t testing.TB, entries ...string) *egress.Policy {
	t.Helper()
	var allow []string
	for _, e := range entries {
		if u, err := url.Parse(e); err == nil && u.Host != "" && u.Scheme != "" {
			port := u.Port()
			if port == "" {
				port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
			}
			e = net.JoinHostPort(u.Hostname(), port)
		}
		allow = append(allow, e)
	}
	p, err := egress.New(egress.Config{Allow: allow})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
