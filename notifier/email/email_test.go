package email

import (
	"context"
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

	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/stream"
)

// server is a real SMTP server (go-smtp) with STARTTLS on a self-signed
// certificate and AUTH PLAIN, recording what it receives.
type server struct {
	addr   string
	roots  *x509.CertPool
	mu     sync.Mutex
	mails  []received
	rcptFn func(to string) error // nil: accept
}

type received struct {
	from, to string
	tls      bool
	data     []byte
}

func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
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

func startServer(t *testing.T) *server {
	t.Helper()
	cert, roots := selfSigned(t)
	s := &server{roots: roots}
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) { return &session{s: s, c: c}, nil }))
	srv.Domain = "127.0.0.1"
	srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.ErrorLog = log.New(io.Discard, "", 0)
	srv.ReadTimeout, srv.WriteTimeout = 5*time.Second, 5*time.Second
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

type session struct {
	s        *server
	c        *smtp.Conn
	auth     bool
	from, to string
}

func (x *session) AuthMechanisms() []string { return []string{sasl.Plain} }
func (x *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != "notifier" || pass != "s3cret" {
			return &smtp.SMTPError{Code: 535, EnhancedCode: smtp.EnhancedCode{5, 7, 8}, Message: "bad credentials"}
		}
		x.auth = true
		return nil
	}), nil
}
func (x *session) Mail(from string, _ *smtp.MailOptions) error {
	if !x.auth {
		return smtp.ErrAuthRequired
	}
	x.from = from
	return nil
}
func (x *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if fn := x.s.rcptFn; fn != nil {
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
	x.s.mu.Lock()
	x.s.mails = append(x.s.mails, received{from: x.from, to: x.to, tls: isTLS, data: b})
	x.s.mu.Unlock()
	return nil
}
func (x *session) Reset()        {}
func (x *session) Logout() error { return nil }

func (s *server) received() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]received(nil), s.mails...)
}

func channel(t *testing.T, s *server, pass string) *Channel {
	t.Helper()
	c, err := New(Config{Addr: s.addr, From: "alerts@dropstream.test", Username: "notifier", Password: pass,
		TLS: &tls.Config{RootCAs: s.roots, ServerName: "127.0.0.1"}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func note() notifier.Notification {
	return notifier.Notification{Flow: "comic", Event: "comic.match", EventID: "n_abc", Subject: "comic:42",
		Recipient: notifier.Recipient{ID: "s_1", Address: "alice@example.com"}, Title: "Amazing Fantasy #15 is in",
		Text: "A copy <in> stock & more", UnsubscribeURL: "http://localhost:8080/v1/unsubscribe/tok"}
}

func TestChannel_sendsOverStartTLSWithAuth(t *testing.T) {
	s := startServer(t)
	if err := channel(t, s, "s3cret").Send(context.Background(), note()); err != nil {
		t.Fatal(err)
	}
	got := s.received()
	if len(got) != 1 || !got[0].tls || got[0].from != "alerts@dropstream.test" || got[0].to != "alice@example.com" {
		t.Fatalf("received %+v, want one mail over TLS", got)
	}
	msg, err := mail.ReadMessage(strings.NewReader(string(got[0].data)))
	if err != nil {
		t.Fatal(err)
	}
	if subj, _ := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject")); subj != "Amazing Fantasy #15 is in" {
		t.Errorf("subject %q", subj)
	}
	if msg.Header.Get("List-Unsubscribe") != "<http://localhost:8080/v1/unsubscribe/tok>" || msg.Header.Get("Message-Id") != "<n_abc@dropstream>" {
		t.Errorf("headers %v", msg.Header)
	}
	_, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil {
		t.Fatal(err)
	}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	parts := map[string]string{}
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(p)
		parts[strings.Split(p.Header.Get("Content-Type"), ";")[0]] = string(b)
	}
	if !strings.Contains(parts["text/plain"], "A copy <in> stock & more") || !strings.Contains(parts["text/plain"], "/v1/unsubscribe/tok") {
		t.Errorf("text part %q", parts["text/plain"])
	}
	if !strings.Contains(parts["text/html"], "A copy &lt;in&gt; stock &amp; more") || !strings.Contains(parts["text/html"], `href="http://localhost:8080/v1/unsubscribe/tok"`) {
		t.Errorf("html part %q (must be escaped)", parts["text/html"])
	}
}

func TestChannel_failures(t *testing.T) {
	s := startServer(t)
	s.rcptFn = func(to string) error {
		switch to {
		case "full@example.com":
			return &smtp.SMTPError{Code: 452, Message: "mailbox full, try later"}
		case "nobody@example.com":
			return &smtp.SMTPError{Code: 550, Message: "no such user"}
		}
		return nil
	}
	ctx := context.Background()
	c := channel(t, s, "s3cret")
	cases := []struct {
		to        string
		ch        *Channel
		permanent bool
		code      int
	}{
		{"full@example.com", c, false, 452},
		{"nobody@example.com", c, true, 550},
		{"alice@example.com", channel(t, s, "wrong"), true, 535},
	}
	for _, tc := range cases {
		n := note()
		n.Recipient.Address = tc.to
		err := tc.ch.Send(ctx, n)
		var de *notifier.DeliveryError
		if !errors.As(err, &de) || stream.IsPermanent(err) != tc.permanent || de.StatusCode != tc.code {
			t.Errorf("%s: %v (permanent %v), want code %d permanent %v", tc.to, err, stream.IsPermanent(err), tc.code, tc.permanent)
		}
	}
	// A server that is down: retryable.
	down, err := New(Config{Addr: "127.0.0.1:1", From: "a@b.co", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := down.Send(ctx, note()); err == nil || stream.IsPermanent(err) {
		t.Errorf("server down: %v, want retryable", err)
	}
	// An untrusted certificate is never accepted.
	untrusted, _ := New(Config{Addr: s.addr, From: "a@b.co", Username: "notifier", Password: "s3cret", Timeout: 5 * time.Second})
	if err := untrusted.Send(ctx, note()); err == nil {
		t.Error("self-signed certificate accepted without its root")
	}
	if n := len(s.received()); n != 0 {
		t.Errorf("%d mails delivered by failing sends", n)
	}
}
