package feed

import (
	"net/mail"
	"testing"

	"github.com/dropstream/dropstream/notifier/email/smtptest"
)

// smtpServer is the notifier's in-test SMTP server (smtptest), which the
// feed's mails reach through the email channel.
type smtpServer struct {
	*smtptest.Server
	addr string
}

// mailMsg is a received mail as the feed tests read it: its recipient,
// headers and decoded parts by media type.
type mailMsg struct {
	to     string
	header mail.Header
	parts  map[string]string
	mail   smtptest.Mail
}

func startSMTP(t *testing.T) *smtpServer {
	t.Helper()
	s := smtptest.Start(t, smtptest.Config{})
	return &smtpServer{Server: s, addr: s.Addr}
}

// received returns the mails received so far.
func (s *smtpServer) received() []mailMsg {
	var out []mailMsg
	for _, m := range s.Received() {
		out = append(out, mailMsg{to: m.To, header: m.Header, parts: m.Parts, mail: m})
	}
	return out
}

// subject returns a mail's decoded subject.
func (m mailMsg) subject() string { return m.mail.Subject() }
