// Package egress is the policy of every outbound connection a client asks
// for: source polls, feed fetches, webhooks, destinations and SMTP. By
// default it refuses the service's own network (loopback, link-local,
// private, CGNAT, multicast, unspecified); Config.Allow lets some through.
// It checks the address actually dialed, URLs with a literal address
// host, and every redirect. Classify sorts failures into classes, the
// only account of a failed exchange the service stores.
package egress

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dropstream/dropstream/internal/bounds"
	"github.com/dropstream/dropstream/internal/clip"
)

// ErrDenied is wrapped by the error of a refused connection or URL.
var ErrDenied = errors.New("egress: address denied")

// DeniedError says which address was refused and why.
type DeniedError struct {
	// Host is the host asked for (a name or a literal address).
	Host string
	// Addr is the refused address.
	Addr netip.Addr
	// Range names the denied range it is in ("loopback", "private", …).
	Range string
}

func (e *DeniedError) Error() string {
	if e.Host != "" && e.Host != e.Addr.String() {
		return fmt.Sprintf("egress: %s resolves to %s, a %s address, which is denied", e.Host, e.Addr, e.Range)
	}
	return fmt.Sprintf("egress: %s is a %s address, which is denied", e.Addr, e.Range)
}

// Unwrap makes errors.Is(err, ErrDenied) true.
func (e *DeniedError) Unwrap() error { return ErrDenied }

// Resolver resolves host names; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Config configures a Policy. The zero value is the default policy.
type Config struct {
	// Allow lists CIDRs, addresses, host names (any port, whatever they
	// resolve to) and host:port pairs allowed despite the denied ranges.
	Allow []string
	// Resolver resolves host names at connect time. Default net.DefaultResolver.
	Resolver Resolver
	// DialTimeout bounds one connection attempt. Default 10s.
	DialTimeout time.Duration
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	c.Resolver = cmp.Or[Resolver](c.Resolver, net.DefaultResolver)
	c.DialTimeout = cmp.Or(c.DialTimeout, 10*time.Second)
	return c
}

// Validate reports every invalid entry of Allow and every invalid field.
func (c Config) Validate() error {
	var errs []error
	for _, e := range c.Allow {
		if _, err := parseEntry(e); err != nil {
			errs = append(errs, err)
		}
	}
	errs = bounds.CheckText(errs, "egress: dial timeout", c.DialTimeout, time.Millisecond, 5*time.Minute, "1ms..5m")
	return errors.Join(errs...)
}

// entry is a parsed allow entry: a prefix, or a host with an optional port.
type entry struct {
	prefix netip.Prefix
	host   string
	port   string
}

func parseEntry(s string) (entry, error) {
	bad := func(why string) (entry, error) {
		return entry{}, fmt.Errorf("egress: allow entry %q: %s", clip.Marked(s, 64), why)
	}
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 255 {
		return bad("want a CIDR, an address, a host name or host:port")
	}
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return bad("not a CIDR")
		}
		return entry{prefix: p.Masked()}, nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return entry{prefix: netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())}, nil
	}
	host, port := s, ""
	if h, p, err := net.SplitHostPort(s); err == nil {
		n, perr := strconv.Atoi(p)
		if perr != nil || n < 1 || n > 65535 {
			return bad("port out of range 1..65535")
		}
		host, port = h, strconv.Itoa(n)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if port == "" {
			return bad("want a CIDR, an address, a host name or host:port")
		}
		return entry{host: a.Unmap().String(), port: port}, nil
	}
	if !validName(host) {
		return bad("not a host name")
	}
	return entry{host: strings.ToLower(strings.TrimSuffix(host, ".")), port: port}, nil
}

// validName reports whether s is a DNS host name ([A-Za-z0-9_-] labels).
func validName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' ||
			strings.ContainsFunc(label, func(r rune) bool {
				return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
			}) {
			return false
		}
	}
	return true
}

// Policy decides which addresses outbound connections may reach. It is
// safe for concurrent use. A nil *Policy is the default policy.
type Policy struct {
	cfg    Config
	dialer net.Dialer

	mu      sync.RWMutex
	entries []entry
}

// New returns the policy of cfg; cfg is defaulted and validated.
func New(cfg Config) (*Policy, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Policy{cfg: cfg, dialer: net.Dialer{Timeout: cfg.DialTimeout}}
	for _, s := range cfg.Allow {
		e, _ := parseEntry(s)
		p.entries = append(p.entries, e)
	}
	return p, nil
}

// Default returns a new policy denying every denied range, allowing nothing.
func Default() *Policy {
	p, _ := New(Config{})
	return p
}

// Permit allows one more host:port from now on (say the demo's). p must not be nil.
func (p *Policy) Permit(hostport string) error {
	if _, _, err := net.SplitHostPort(hostport); err != nil {
		return fmt.Errorf("egress: permit %q: want host:port", clip.Marked(hostport, 64))
	}
	e, err := parseEntry(hostport)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.entries = append(p.entries, e)
	return nil
}

// allowed reports whether an allow entry admits host (as asked for, a
// name or an address), addr (the address connected to, if valid) and
// port.
func (p *Policy) allowed(host string, addr netip.Addr, port string) bool {
	if p == nil {
		return false
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	p.mu.RLock()
	defer p.mu.RUnlock()
	for _, e := range p.entries {
		switch {
		case e.prefix.IsValid():
			if addr.IsValid() && e.prefix.Contains(addr) {
				return true
			}
		case e.port != "" && e.port != port:
		case e.host == host, addr.IsValid() && e.host == addr.String():
			return true
		}
	}
	return false
}

// CheckAddr reports, as a *DeniedError, whether connecting to addr on
// port (host being the name asked for, or the address) is refused.
func (p *Policy) CheckAddr(host string, addr netip.Addr, port string) error {
	addr = addr.Unmap().WithZone("")
	r := deniedRange(addr)
	if r == "" || p.allowed(host, addr, port) {
		return nil
	}
	return &DeniedError{Host: host, Addr: addr, Range: r}
}

// ErrInvalidURL is wrapped by the error of a URL a client gave that does
// not parse, or that carries credentials (user:password@).
var ErrInvalidURL = errors.New("egress: invalid URL")

// NormalizeURL checks a URL a client gives and returns it trimmed, to be
// stored as checked. One that does not parse or carries credentials is
// ErrInvalidURL; a literal denied host is *DeniedError.
func (p *Policy) NormalizeURL(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	u, err := url.Parse(raw)
	if err != nil {
		return raw, fmt.Errorf("%w: does not parse", ErrInvalidURL)
	}
	if u.User != nil {
		return raw, fmt.Errorf("%w: must not carry credentials (user:password@)", ErrInvalidURL)
	}
	return raw, p.checkURL(u)
}

// CheckURL is NormalizeURL's check of raw, for a URL the caller does not
// store.
func (p *Policy) CheckURL(raw string) error {
	_, err := p.NormalizeURL(raw)
	return err
}

func (p *Policy) checkURL(u *url.URL) error {
	host := u.Hostname()
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return nil
	}
	port := cmp.Or(u.Port(), map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)])
	return p.CheckAddr(host, addr, port)
}

// CheckRedirect refuses a redirect to a literal denied address; an
// http.Client's CheckRedirect calls it for every redirect (the dial check
// covers host names).
func (p *Policy) CheckRedirect(req *http.Request) error {
	return p.checkURL(req.URL)
}

// DialContext connects as a net.Dialer does, but only to allowed
// addresses: it resolves host names itself. Refusals wrap ErrDenied.
func (p *Policy) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	p = OrDefaultShared(p)
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if err := p.CheckAddr(host, a, port); err != nil {
			return nil, &net.OpError{Op: "dial", Net: network, Err: err}
		}
		return p.dialer.DialContext(ctx, network, addr)
	}
	nameAllowed := p.allowed(host, netip.Addr{}, port)
	ipNet := "ip"
	switch network {
	case "tcp4", "udp4":
		ipNet = "ip4"
	case "tcp6", "udp6":
		ipNet = "ip6"
	}
	addrs, err := p.cfg.Resolver.LookupNetIP(ctx, ipNet, host)
	if err != nil {
		var dnsErr *net.DNSError
		if !errors.As(err, &dnsErr) {
			err = &net.DNSError{Err: err.Error(), Name: host}
		}
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	var errs []error
	for _, a := range addrs {
		if !nameAllowed {
			if err := p.CheckAddr(host, a, port); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		conn, err := p.dialer.DialContext(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 0 {
		return nil, &net.OpError{Op: "dial", Net: network, Err: &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}}
	}
	return nil, &net.OpError{Op: "dial", Net: network, Err: errors.Join(errs...)}
}

// defaultShared is the policy a nil *Policy dials with.
var defaultShared = sync.OnceValue(Default)

// OrDefaultShared returns p, or a shared default policy when p is nil;
// the result must not be given to Permit.
func OrDefaultShared(p *Policy) *Policy { return cmp.Or(p, defaultShared()) }

// Transport returns a transport like http.DefaultTransport that dials
// through DialContext and uses no proxy.
func (p *Policy) Transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = p.DialContext
	return t
}

// deniedRange names the denied range addr is in, "" when it is in none.
// addr is unmapped first: ::ffff:127.0.0.1 is loopback.
func deniedRange(addr netip.Addr) string {
	addr = addr.Unmap()
	switch {
	case !addr.IsValid():
		return "invalid"
	case addr.IsUnspecified():
		return "unspecified"
	case addr.IsLoopback():
		return "loopback"
	case addr.IsLinkLocalUnicast(), addr.IsLinkLocalMulticast():
		return "link-local"
	case addr.IsMulticast(), addr.IsInterfaceLocalMulticast():
		return "multicast"
	case addr.IsPrivate():
		return "private"
	}
	for _, r := range extraDenied {
		if r.prefix.Contains(addr) {
			return r.name
		}
	}
	// NAT64 and 6to4 addresses carry an IPv4 address, which a gateway
	// may reach on the service's behalf.
	if b := addr.As16(); nat64.Contains(addr) {
		if r := deniedRange(netip.AddrFrom4([4]byte(b[12:16]))); r != "" {
			return "NAT64 " + r
		}
	} else if sixToFour.Contains(addr) {
		if r := deniedRange(netip.AddrFrom4([4]byte(b[2:6]))); r != "" {
			return "6to4 " + r
		}
	}
	return ""
}

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// extraDenied are the denied ranges netip has no predicate for.
var extraDenied = []struct {
	name   string
	prefix netip.Prefix
}{
	{"CGNAT", netip.MustParsePrefix("100.64.0.0/10")},
	{"this-network", netip.MustParsePrefix("0.0.0.0/8")},
	{"reserved", netip.MustParsePrefix("240.0.0.0/4")},
	{"IPv4-compatible", netip.MustParsePrefix("::/96")},
}
