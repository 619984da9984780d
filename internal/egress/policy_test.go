package egress_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/dropstream/dropstream/internal/egress"
	"github.com/dropstream/dropstream/internal/egress/egresstest"
)

// mapResolver resolves the names it holds to their addresses.
type mapResolver map[string][]netip.Addr

func (m mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := m[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func TestPolicy_defaultDeniesInternalRanges(t *testing.T) {
	p := egress.Default()
	for _, tc := range []struct {
		url    string
		denied bool
	}{
		{"http://127.0.0.1:8080/x", true},
		{"http://127.9.9.9/", true},
		{"http://[::1]:80/", true},
		{"http://169.254.169.254/latest/meta-data/", true},
		{"http://[fe80::1]/", true},
		{"http://10.1.2.3/", true},
		{"http://172.16.0.1/", true},
		{"http://172.31.255.255/", true},
		{"http://192.168.1.1/", true},
		{"http://[fc00::1]/", true},
		{"http://[fd12:3456::1]/", true},
		{"http://100.64.0.1/", true},
		{"http://100.127.255.255/", true},
		{"http://224.0.0.1/", true},
		{"http://[ff02::1]/", true},
		{"http://0.0.0.0/", true},
		{"http://[::]/", true},
		{"http://[::ffff:127.0.0.1]/", true},
		{"http://[::ffff:169.254.169.254]/", true},
		{"http://[::ffff:10.0.0.1]/", true},
		{"http://[64:ff9b::7f00:1]/", true},
		{"http://[64:ff9b::a9fe:a9fe]/", true},
		{"http://[2002:a00:1::1]/", true},
		{"http://[64:ff9b::5db8:d822]/", false},
		{"https://93.184.216.34/", false},
		{"http://172.32.0.1/", false},
		{"http://100.128.0.1/", false},
		{"http://[2606:4700::1111]/", false},
		{"https://example.org/", false}, // names are checked when connecting
	} {
		err := p.CheckURL(tc.url)
		if got := errors.Is(err, egress.ErrDenied); got != tc.denied {
			t.Errorf("CheckURL(%s) = %v, want denied %v", tc.url, err, tc.denied)
		}
	}
}

func TestPolicy_allowEntries(t *testing.T) {
	p, err := egress.New(egress.Config{Allow: []string{"10.1.0.0/16", "192.168.7.7", "127.0.0.1:8081", "[::1]:9000", "feeds.internal", "smtp.internal:25"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host, addr, port string
		allowed          bool
	}{
		{"10.1.2.3", "10.1.2.3", "80", true},
		{"10.2.0.1", "10.2.0.1", "80", false},
		{"192.168.7.7", "192.168.7.7", "443", true},
		{"::ffff:192.168.7.7", "::ffff:192.168.7.7", "443", true},
		{"192.168.7.8", "192.168.7.8", "443", false},
		{"127.0.0.1", "127.0.0.1", "8081", true},
		{"127.0.0.1", "127.0.0.1", "8082", false},
		{"::1", "::1", "9000", true},
		{"::1", "::1", "9001", false},
		{"feeds.internal", "10.9.9.9", "443", true},
		{"FEEDS.internal.", "10.9.9.9", "80", true},
		{"other.internal", "10.9.9.9", "443", false},
		{"smtp.internal", "10.9.9.10", "25", true},
		{"smtp.internal", "10.9.9.10", "587", false},
	} {
		err := p.CheckAddr(tc.host, netip.MustParseAddr(tc.addr), tc.port)
		if got := err == nil; got != tc.allowed {
			t.Errorf("CheckAddr(%s, %s, %s) = %v, want allowed %v", tc.host, tc.addr, tc.port, err, tc.allowed)
		}
	}
}

func TestConfig_validateReportsEveryBadEntry(t *testing.T) {
	_, err := egress.New(egress.Config{Allow: []string{"10.0.0.0/33", "bad host!", "127.0.0.1:99999", "ok.example", "1.2.3.4:80"}})
	if err == nil {
		t.Fatal("no error for bad entries")
	}
	for _, want := range []string{`"10.0.0.0/33"`, `"bad host!"`, `"127.0.0.1:99999"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if strings.Contains(err.Error(), "ok.example") || strings.Contains(err.Error(), "1.2.3.4:80") {
		t.Errorf("error %q names a good entry", err)
	}
}

func newServer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func client(p *egress.Policy) *http.Client {
	return &http.Client{Transport: p.Transport(), CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		return p.CheckRedirect(req)
	}}
}

func get(c *http.Client, u string) (string, error) {
	resp, err := c.Get(u)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// The default policy refuses to connect to loopback, whatever the form of
// the address, before any byte reaches the peer.
func TestPolicy_defaultRefusesLoopbackConnections(t *testing.T) {
	hit := false
	srv := newServer(t, func(w http.ResponseWriter, _ *http.Request) { hit = true })
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	c := client(egress.Default())
	for _, u := range []string{srv.URL, "http://[::ffff:127.0.0.1]:" + itoa(port) + "/"} {
		_, err := get(c, u)
		if !errors.Is(err, egress.ErrDenied) {
			t.Errorf("GET %s: %v, want ErrDenied", u, err)
		}
		if egress.Classify(err) != egress.ClassDenied {
			t.Errorf("GET %s: class %q, want denied", u, egress.Classify(err))
		}
	}
	if _, err := get(client(nil), srv.URL); !errors.Is(err, egress.ErrDenied) {
		t.Errorf("nil policy: GET %s: %v, want ErrDenied", srv.URL, err)
	}
	if hit {
		t.Error("the server was reached")
	}
}

// A test's policy allowing the server reaches it.
func TestPolicy_allowedServerIsReached(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "hello") })
	for name, p := range map[string]*egress.Policy{"host:port": egresstest.Allow(t, srv.URL), "loopback": egresstest.Loopback(t)} {
		body, err := get(client(p), srv.URL)
		if err != nil || body != "hello" {
			t.Errorf("%s: GET = %q, %v; want hello", name, body, err)
		}
	}
	other := egresstest.Allow(t, "127.0.0.1:1")
	if _, err := get(client(other), srv.URL); !errors.Is(err, egress.ErrDenied) {
		t.Errorf("policy allowing another port: %v, want ErrDenied", err)
	}
}

// A public-looking host name that resolves to a denied address (DNS
// rebinding) is refused when connecting; an allowed name is reached.
func TestPolicy_nameResolvingToDeniedAddressRefusedAtConnect(t *testing.T) {
	hit := false
	srv := newServer(t, func(w http.ResponseWriter, _ *http.Request) { hit = true })
	port := itoa(srv.Listener.Addr().(*net.TCPAddr).Port)
	res := mapResolver{"rebind.example": {netip.MustParseAddr("127.0.0.1")},
		"mapped.example":  {netip.MustParseAddr("::ffff:127.0.0.1")},
		"allowed.example": {netip.MustParseAddr("127.0.0.1")}}
	p, err := egress.New(egress.Config{Resolver: res, Allow: []string{"allowed.example:" + port}})
	if err != nil {
		t.Fatal(err)
	}
	c := client(p)
	for _, host := range []string{"rebind.example", "mapped.example"} {
		u := "http://" + host + ":" + port + "/"
		if err := p.CheckURL(u); err != nil {
			t.Fatalf("CheckURL(%s) = %v: a name passes until it is connected to", u, err)
		}
		_, err := get(c, u)
		var de *egress.DeniedError
		if !errors.As(err, &de) || de.Host != host || de.Range != "loopback" {
			t.Errorf("GET %s: %v, want a DeniedError for %s (loopback)", u, err, host)
		}
	}
	if hit {
		t.Fatal("the server was reached through a denied name")
	}
	// The name allowed by host:port connects to what it resolves to (the
	// loopback server); the names above stay refused.
	if _, err := get(c, "http://allowed.example:"+port+"/"); err != nil || !hit {
		t.Errorf("allowed name: err %v, server reached %v", err, hit)
	}
}

// A redirect to a denied address is refused, whether the address is
// literal (CheckRedirect) or a name resolving to one (the dial check).
func TestPolicy_redirectToDeniedAddressRefused(t *testing.T) {
	internalHit := false
	internal := newServer(t, func(w http.ResponseWriter, _ *http.Request) { internalHit = true })
	iport := itoa(internal.Listener.Addr().(*net.TCPAddr).Port)
	for _, target := range []string{"http://169.254.169.254/latest/meta-data/", "http://[::ffff:127.0.0.1]:" + iport + "/",
		"http://rebind.example:" + iport + "/"} {
		public := newServer(t, func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, target, http.StatusFound) })
		// The policy allows the redirecting server by host:port only.
		p, err := egress.New(egress.Config{Allow: []string{hostPort(t, public.URL)},
			Resolver: mapResolver{"rebind.example": {netip.MustParseAddr("127.0.0.1")}}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = get(client(p), public.URL)
		if !errors.Is(err, egress.ErrDenied) {
			t.Errorf("redirect to %s: %v, want ErrDenied", target, err)
		}
	}
	if internalHit {
		t.Error("a redirect reached the internal server")
	}
}

func TestPolicy_permitAddsHostPort(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	p := egress.Default()
	if _, err := get(client(p), srv.URL); !errors.Is(err, egress.ErrDenied) {
		t.Fatalf("before Permit: %v, want ErrDenied", err)
	}
	if err := p.Permit(hostPort(t, srv.URL)); err != nil {
		t.Fatal(err)
	}
	if body, err := get(client(p), srv.URL); err != nil || body != "ok" {
		t.Errorf("after Permit: %q, %v", body, err)
	}
	if err := p.CheckURL("http://127.0.0.1:1/"); !errors.Is(err, egress.ErrDenied) {
		t.Errorf("another loopback port after Permit: %v, want ErrDenied", err)
	}
	if err := p.Permit("127.0.0.0/8"); err == nil {
		t.Error("Permit of a CIDR: no error")
	}
}

func hostPort(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

func itoa(n int) string {
	return netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(n)).String()[len("0.0.0.0:"):]
}

// Every URL a client gives is trimmed and parsed before it is checked, so
// what is stored is what was checked; credentials are refused.
func TestNormalizeURL_trimsThenChecksAndRefusesCredentials(t *testing.T) {
	p := egress.Default()
	for _, tc := range []struct {
		raw, want string
		err       error
	}{
		{" http://127.0.0.1:8080/x", "http://127.0.0.1:8080/x", egress.ErrDenied},
		{"\thttps://example.org/feed.xml \n", "https://example.org/feed.xml", nil},
		{"https://user:password@example.org/feed.xml", "", egress.ErrInvalidURL},
		{"https://user@example.org/", "", egress.ErrInvalidURL},
		{"http://[::1", "", egress.ErrInvalidURL},
		{" ops@example.org ", "ops@example.org", nil},
	} {
		got, err := p.NormalizeURL(tc.raw)
		if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) || (tc.want != "" && got != tc.want) {
			t.Errorf("NormalizeURL(%q) = %q, %v; want %q, %v", tc.raw, got, err, tc.want, tc.err)
		}
		if cerr := p.CheckURL(tc.raw); !errors.Is(cerr, tc.err) || (tc.err == nil && cerr != nil) {
			t.Errorf("CheckURL(%q) = %v, want %v", tc.raw, cerr, tc.err)
		}
	}
}
