// Package smtptest runs a real SMTP server inside a test, for the email
// channel's tests and the tests of every flow that mails through it: the
// server of github.com/emersion/go-smtp on a loopback port, offering
// STARTTLS with a self-signed certificate (Server.ClientTLS trusts it)
// and, when Config.Username is set, requiring AUTH PLAIN. It keeps every
// mail it accepts, with its MIME parts decoded.
package smtptest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"log"
	"math/big"
	"mime"
	"mime/multipart"
	"net"
	"net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// Host is the server's address and the name in its certificate.
const Host = "127.0.0.1"

// Config configures a Server. The zero Config accepts every mail without
// authentication.
type Config struct {
	// Username and Password are the only credentials AUTH PLAIN accepts;
	// when Username is set, MAIL FROM needs them (smtp.ErrAuthRequired
	// otherwise). Empty Username: no authentication offered.
	Username, Password string
	// Rcpt, when set, answers each RCPT TO: a non-nil error (an
	// *smtp.SMTPError carries its code) refuses the recipient.
	Rcpt func(to string) error
}

// Mail is one mail the server accepted.
type Mail struct {
	// From and To are the envelope's sender and (last) recipient.
	From, To string
	// TLS is true when the mail came over STARTTLS.
	TLS bool
	// Data is the message as received.
	Data []byte
	// Header is the message's header; nil when it did not parse.
	Header mail.Header
	// Parts are the decoded bodies of a multipart message by media type
	// ("text/plain", "text/html"); nil for other messages.
	Parts map[string]string
}

// Subject returns the mail's decoded Subject header.
func (m Mail) Subject() string {
	s, _ := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
	return s
}

// Server is a running SMTP server; it stops when the test ends.
type Server struct {
	// Addr is its host:port.
	Addr string
	// Roots trusts its certificate.
	Roots *x509.CertPool
	cfg   Config
	mu    sync.Mutex
	mails []Mail
}

// Start starts a server for the test t.
func Start(t testing.TB, cfg Config) *Server {
	t.Helper()
	cert, roots := selfSigned(t)
	s := &Server{Roots: roots, cfg: cfg}
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) { return &session{s: s, c: c}, nil }))
	srv.Domain = Host
	srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.ErrorLog = log.New(io.Discard, "", 0)
	srv.ReadTimeout, srv.WriteTimeout = 5*time.Second, 5*time.Second
	ln, err := net.Listen("tcp", Host+":0")
	if err != nil {
		t.Fatal(err)
	}
	s.Addr = ln.Addr().String()
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

// ClientTLS is the TLS configuration of a client that trusts the server.
func (s *Server) ClientTLS() *tls.Config {
	return &tls.Config{RootCAs: s.Roots, ServerName: Host, MinVersion: tls.VersionTLS12}
}

// Received returns the mails accepted so far, oldest first.
func (s *Server) Received() []Mail {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Mail(nil), s.mails...)
}

func selfSigned(t testing.TB) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: Host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP(Host)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
}

// session is one SMTP connection.
type session struct {
	s        *Server
	c        *smtp.Conn
	auth     bool
	from, to string
}

func (x *session) AuthMechanisms() []string {
	if x.s.cfg.Username == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (x *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != x.s.cfg.Username || pass != x.s.cfg.Password {
			return &smtp.SMTPError{Code: 535, EnhancedCode: smtp.EnhancedCode{5, 7, 8}, Message: "bad credentials"}
		}
		x.auth = true
		return nil
	}), nil
}

func (x *session) Mail(from string, _ *smtp.MailOptions) error {
	if x.s.cfg.Username != "" && !x.auth {
		return smtp.ErrAuthRequired
	}
	x.from = from
	return nil
}

func (x *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if fn := x.s.cfg.Rcpt; fn != nil {
		if err := fn(to); err != nil {
			return err
		}
	}
	x.to = to
	return nil
}

func (x *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	_, isTLS := x.c.TLSConnectionState()
	m := Mail{From: x.from, To: x.to, TLS: isTLS, Data: b}
	if msg, err := mail.ReadMessage(strings.NewReader(string(b))); err == nil {
		m.Header = msg.Header
		m.Parts, _ = parts(msg)
	}
	x.s.mu.Lock()
	x.s.mails = append(x.s.mails, m)
	x.s.mu.Unlock()
	return nil
}

func (x *session) Reset()        {}
func (x *session) Logout() error { return nil }

// parts decodes a multipart message's bodies by media type (the reader
// undoes their quoted-printable encoding).
func parts(msg *mail.Message) (map[string]string, error) {
	media, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || !strings.HasPrefix(media, "multipart/") {
		return nil, err
	}
	out := map[string]string{}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		b, err := io.ReadAll(p)
		if err != nil {
			return out, err
		}
		out[strings.Split(p.Header.Get("Content-Type"), ";")[0]] = string(b)
	}
}
