package feed

import (
	"io"
	"log"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
)

// smtpServer is a real SMTP server (go-smtp, as the notifier's email tests
// use) recording the mails it receives.
type smtpServer struct {
	addr  string
	mu    sync.Mutex
	mails []mailMsg
}

// mailMsg is a received mail: its recipient, headers and decoded parts by
// media type.
type mailMsg struct {
	to     string
	header mail.Header
	parts  map[string]string
}

func startSMTP(t *testing.T) *smtpServer {
	t.Helper()
	s := &smtpServer{}
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &smtpSession{s: s}, nil }))
	srv.Domain = "127.0.0.1"
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

type smtpSession struct {
	s  *smtpServer
	to string
}

func (x *smtpSession) Mail(string, *smtp.MailOptions) error { return nil }
func (x *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	x.to = to
	return nil
}
func (x *smtpSession) Data(r io.Reader) error {
	msg, err := mail.ReadMessage(r)
	if err != nil {
		return err
	}
	m := mailMsg{to: x.to, header: msg.Header, parts: map[string]string{}}
	_, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil {
		return err
	}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		var body io.Reader = p
		if p.Header.Get("Content-Transfer-Encoding") == "quoted-printable" {
			body = quotedprintable.NewReader(p)
		}
		b, err := io.ReadAll(body)
		if err != nil {
			return err
		}
		m.parts[strings.Split(p.Header.Get("Content-Type"), ";")[0]] = string(b)
	}
	x.s.mu.Lock()
	x.s.mails = append(x.s.mails, m)
	x.s.mu.Unlock()
	return nil
}
func (x *smtpSession) Reset()        {}
func (x *smtpSession) Logout() error { return nil }

// received returns the mails received so far.
func (s *smtpServer) received() []mailMsg {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]mailMsg(nil), s.mails...)
}

// subject returns a mail's decoded subject.
func (m mailMsg) subject() string {
	s, _ := new(mime.WordDecoder).DecodeHeader(m.header.Get("Subject"))
	return s
}
