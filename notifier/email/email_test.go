package email

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/dropstream/dropstream/internal/egress"
	"github.com/dropstream/dropstream/internal/egress/egresstest"
	"github.com/dropstream/dropstream/notifier/channel"
	"github.com/dropstream/dropstream/notifier/email/smtptest"
	"github.com/dropstream/dropstream/stream"
)

// startServer starts the in-test SMTP server with the channel's
// credentials; rcpt answers RCPT TO (nil accepts every recipient).
func startServer(t *testing.T, rcpt func(to string) error) *smtptest.Server {
	return smtptest.Start(t, smtptest.Config{Username: "notifier", Password: "s3cret", Rcpt: rcpt})
}

func newChannel(t *testing.T, s *smtptest.Server, pass string) *Channel {
	t.Helper()
	c, err := New(Config{Addr: s.Addr, From: "alerts@dropstream.test", Username: "notifier", Password: pass,
		TLS: s.ClientTLS(), Timeout: 5 * time.Second, Egress: egresstest.Allow(t, s.Addr)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func note() channel.Notification {
	return channel.Notification{Flow: "comic", Event: "comic.match", EventID: "n_abc", Subject: "comic:42",
		Recipient: channel.Recipient{ID: "s_1", Address: "alice@example.com"}, Title: "Amazing Fantasy #15 is in",
		Text: "A copy <in> stock & more", UnsubscribeURL: "http://localhost:8080/v1/unsubscribe/tok"}
}

func TestChannel_sendsOverStartTLSWithAuth(t *testing.T) {
	s := startServer(t, nil)
	if err := newChannel(t, s, "s3cret").Send(context.Background(), note()); err != nil {
		t.Fatal(err)
	}
	got := s.Received()
	if len(got) != 1 || !got[0].TLS || got[0].From != "alerts@dropstream.test" || got[0].To != "alice@example.com" {
		t.Fatalf("received %+v, want one mail over TLS", got)
	}
	if subj := got[0].Subject(); subj != "Amazing Fantasy #15 is in" {
		t.Errorf("subject %q", subj)
	}
	h := got[0].Header
	if h.Get("List-Unsubscribe") != "<http://localhost:8080/v1/unsubscribe/tok>" || h.Get("Message-Id") != "<n_abc@dropstream>" {
		t.Errorf("headers %v", h)
	}
	parts := got[0].Parts
	if !strings.Contains(parts["text/plain"], "A copy <in> stock & more") || !strings.Contains(parts["text/plain"], "/v1/unsubscribe/tok") {
		t.Errorf("text part %q", parts["text/plain"])
	}
	if !strings.Contains(parts["text/html"], "A copy &lt;in&gt; stock &amp; more") || !strings.Contains(parts["text/html"], `href="http://localhost:8080/v1/unsubscribe/tok"`) {
		t.Errorf("html part %q (must be escaped)", parts["text/html"])
	}
}

// A notification with an HTML fragment (notifier.Request.HTML) shows it as
// it is in the HTML part, in place of the escaped text; the text part
// keeps the text.
func TestChannel_htmlFragmentReplacesTheTextInTheHTMLPart(t *testing.T) {
	s := startServer(t, nil)
	n := note()
	n.HTML = `<ul><li><a href="https://example.org/1?a=1&amp;b=2">First &amp; best</a></li></ul>`
	if err := newChannel(t, s, "s3cret").Send(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	got := s.Received()
	if len(got) != 1 {
		t.Fatalf("received %d mails, want 1", len(got))
	}
	parts := got[0].Parts
	if !strings.Contains(parts["text/html"], n.HTML) || strings.Contains(parts["text/html"], "A copy &lt;in&gt;") {
		t.Errorf("html part %q: want the fragment as it is, without the text", parts["text/html"])
	}
	if !strings.Contains(parts["text/html"], `href="http://localhost:8080/v1/unsubscribe/tok"`) {
		t.Errorf("html part %q lost its unsubscribe link", parts["text/html"])
	}
	if !strings.Contains(parts["text/plain"], "A copy <in> stock & more") || strings.Contains(parts["text/plain"], "<ul>") {
		t.Errorf("text part %q: want the text, not the fragment", parts["text/plain"])
	}
}

func TestChannel_failures(t *testing.T) {
	s := startServer(t, func(to string) error {
		switch to {
		case "full@example.com":
			return &smtp.SMTPError{Code: 452, Message: "mailbox full, try later"}
		case "nobody@example.com":
			return &smtp.SMTPError{Code: 550, Message: "no such user"}
		}
		return nil
	})
	ctx := context.Background()
	c := newChannel(t, s, "s3cret")
	cases := []struct {
		to        string
		ch        *Channel
		permanent bool
		code      int
	}{
		{"full@example.com", c, false, 452},
		{"nobody@example.com", c, true, 550},
		{"alice@example.com", newChannel(t, s, "wrong"), true, 535},
	}
	for _, tc := range cases {
		n := note()
		n.Recipient.Address = tc.to
		err := tc.ch.Send(ctx, n)
		var de *channel.DeliveryError
		if !errors.As(err, &de) || stream.IsPermanent(err) != tc.permanent || de.StatusCode != tc.code {
			t.Errorf("%s: %v (permanent %v), want code %d permanent %v", tc.to, err, stream.IsPermanent(err), tc.code, tc.permanent)
		}
		// Only the reply code and its class are kept, never the server's text.
		wantClass := egress.ClassSMTP4xx
		if tc.code >= 500 {
			wantClass = egress.ClassSMTP5xx
		}
		if de != nil && (de.Class != wantClass || !strings.Contains(err.Error(), strconv.Itoa(tc.code)) ||
			strings.Contains(err.Error(), "mailbox full") || strings.Contains(err.Error(), "no such user") || strings.Contains(err.Error(), "bad credentials")) {
			t.Errorf("%s: %v (class %q), want the code and the class %s without the server's text", tc.to, err, de.Class, wantClass)
		}
	}
	// A server that is down: retryable.
	down, err := New(Config{Addr: "127.0.0.1:1", From: "a@b.co", Timeout: time.Second, Egress: egresstest.Allow(t, "127.0.0.1:1")})
	if err != nil {
		t.Fatal(err)
	}
	if err := down.Send(ctx, note()); err == nil || stream.IsPermanent(err) {
		t.Errorf("server down: %v, want retryable", err)
	}
	// An untrusted certificate is never accepted.
	untrusted, _ := New(Config{Addr: s.Addr, From: "a@b.co", Username: "notifier", Password: "s3cret", Timeout: 5 * time.Second,
		Egress: egresstest.Allow(t, s.Addr)})
	if err := untrusted.Send(ctx, note()); err == nil {
		t.Error("self-signed certificate accepted without its root")
	}
	if n := len(s.Received()); n != 0 {
		t.Errorf("%d mails delivered by failing sends", n)
	}
}

// The default policy refuses a server on loopback: when its address is
// literal, at construction (the app does not start); when it is a name,
// at each send, permanently.
func TestChannel_egressPolicy(t *testing.T) {
	s := startServer(t, nil)
	_, err := New(Config{Addr: s.Addr, From: "a@b.co", TLS: s.ClientTLS()})
	if !errors.Is(err, egress.ErrDenied) {
		t.Errorf("New with a loopback server and the default policy = %v, want ErrDenied", err)
	}
	_, port, _ := net.SplitHostPort(s.Addr)
	c, err := New(Config{Addr: "localhost:" + port, From: "a@b.co", TLS: s.ClientTLS(), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Send(context.Background(), note())
	var de *channel.DeliveryError
	if !stream.IsPermanent(err) || !errors.As(err, &de) || de.Class != egress.ClassDenied {
		t.Errorf("Send to localhost = %v, want a permanent denied *DeliveryError", err)
	}
	if n := len(s.Received()); n != 0 {
		t.Errorf("%d mails delivered", n)
	}
}
