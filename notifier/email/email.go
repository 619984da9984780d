// Package email is the notifier's email channel: one message per
// notification over SMTP (STARTTLS, AUTH PLAIN), text and HTML bodies from
// templates, List-Unsubscribe (RFC 2369, RFC 8058 one-click) and the
// notification's id as Message-ID.
//
// A 4xx answer, network error or timeout is retryable; a 5xx answer or a
// denied address is permanent. Errors wrap a *channel.DeliveryError
// keeping the reply code, never the server's text.
package email

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	htmltemplate "html/template"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/netip"
	"net/textproto"
	"strings"
	texttemplate "text/template"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/dropstream/dropstream/internal/egress"
	"github.com/dropstream/dropstream/internal/settings"
	"github.com/dropstream/dropstream/notifier/channel"
	"github.com/dropstream/dropstream/stream"
)

// ChannelName is the email channel's name.
const ChannelName = "email"

// Config configures the email channel. Zero fields take their defaults.
type Config struct {
	// Addr is the SMTP server, host:port (usually :587). Required.
	Addr string
	// From is the sender address. Required.
	From string
	// Username and Password authenticate (AUTH PLAIN) when Username is set.
	Username string
	Password string
	// InsecureNoTLS sends without STARTTLS (local relays only). By default
	// a server without STARTTLS fails every send, retryably.
	InsecureNoTLS bool
	// TLS configures STARTTLS. Default: ServerName from Addr, system roots.
	TLS *tls.Config
	// Timeout bounds one send, connection included. Default 10s.
	Timeout time.Duration `default:"10s" range:"1ms..5m"`
	// Egress is the policy of the connection to Addr. Default egress.Default().
	Egress *egress.Policy
	// TextTemplate and HTMLTemplate override the bodies' templates (given
	// Data). Default DefaultTextTemplate and DefaultHTMLTemplate.
	TextTemplate string
	HTMLTemplate string
}

// Data is what the templates get.
type Data struct {
	ID      string
	Flow    string
	Event   string
	Subject string
	Title   string
	Text    string
	// HTML is the notification's HTML fragment, shown in place of Text.
	HTML           htmltemplate.HTML
	ObservedAt     time.Time
	UnsubscribeURL string
}

// DefaultTextTemplate is the text body's template.
const DefaultTextTemplate = `{{.Title}}

{{if .Text}}{{.Text}}

{{end}}About: {{.Subject}} ({{.Event}})
{{if .UnsubscribeURL}}
To stop these messages: {{.UnsubscribeURL}}
{{end}}`

// DefaultHTMLTemplate is the HTML body's template.
const DefaultHTMLTemplate = `<!doctype html>
<html><body>
<h1>{{.Title}}</h1>
{{if .HTML}}{{.HTML}}{{else if .Text}}<p>{{.Text}}</p>{{end}}
<p>About: {{.Subject}} ({{.Event}})</p>
{{if .UnsubscribeURL}}<p><a href="{{.UnsubscribeURL}}">Unsubscribe</a></p>{{end}}
</body></html>`

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	settings.Defaults(&c)
	c.TextTemplate = cmp.Or(c.TextTemplate, DefaultTextTemplate)
	c.HTMLTemplate = cmp.Or(c.HTMLTemplate, DefaultHTMLTemplate)
	c.Egress = cmp.Or(c.Egress, egress.Default())
	if c.TLS == nil {
		host, _, _ := net.SplitHostPort(c.Addr)
		c.TLS = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	}
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c Config) Validate() error {
	errs := []error{settings.Check("email", &c)}
	if host, port, err := net.SplitHostPort(c.Addr); err != nil {
		errs = append(errs, fmt.Errorf("email: addr %q: want host:port", c.Addr))
	} else if a, err := netip.ParseAddr(host); err == nil {
		if err := c.Egress.CheckAddr(host, a, port); err != nil {
			errs = append(errs, fmt.Errorf("email: addr %q: not allowed by the egress policy: %w", c.Addr, err))
		}
	}
	if !strings.Contains(c.From, "@") || strings.ContainsAny(c.From, "\r\n<> ") || len(c.From) > 254 {
		errs = append(errs, fmt.Errorf("email: from %q: want an address", c.From))
	}
	return errors.Join(errs...)
}

// Channel sends notifications as email. It is safe for concurrent use.
type Channel struct {
	cfg  Config
	text *texttemplate.Template
	html *htmltemplate.Template
}

// New returns the email channel.
func New(cfg Config) (*Channel, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	text, err := texttemplate.New("text").Parse(cfg.TextTemplate)
	if err != nil {
		return nil, fmt.Errorf("email: text template: %w", err)
	}
	html, err := htmltemplate.New("html").Parse(cfg.HTMLTemplate)
	if err != nil {
		return nil, fmt.Errorf("email: html template: %w", err)
	}
	return &Channel{cfg: cfg, text: text, html: html}, nil
}

// Name returns ChannelName.
func (c *Channel) Name() string { return ChannelName }

// Send mails n to n.Recipient.Address; see the package documentation.
func (c *Channel) Send(ctx context.Context, n channel.Notification) error {
	to := n.Recipient.Address
	if to == "" || strings.ContainsAny(to, "\r\n<> ") {
		return stream.Permanent(&channel.DeliveryError{Channel: ChannelName, Detail: "recipient has no valid address"})
	}
	msg, err := c.compose(n)
	if err != nil {
		return stream.Permanent(&channel.DeliveryError{Channel: ChannelName, Detail: "compose", Err: err})
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	if err := c.send(ctx, to, msg); err != nil {
		return classify(err)
	}
	return nil
}

// send runs one SMTP session; the connection's deadline follows ctx.
func (c *Channel) send(ctx context.Context, to string, msg []byte) error {
	conn, err := c.cfg.Egress.DialContext(ctx, "tcp", c.cfg.Addr)
	if err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	var cl *smtp.Client
	if c.cfg.InsecureNoTLS {
		cl = smtp.NewClient(conn)
	} else if cl, err = smtp.NewClientStartTLS(conn, c.cfg.TLS); err != nil {
		_ = conn.Close()
		return err
	}
	defer cl.Close()
	if c.cfg.Username != "" {
		if err := cl.Auth(sasl.NewPlainClient("", c.cfg.Username, c.cfg.Password)); err != nil {
			return err
		}
	}
	if err := cl.SendMail(c.cfg.From, []string{to}, bytes.NewReader(msg)); err != nil {
		return err
	}
	return cl.Quit()
}

// classify turns an SMTP error into a delivery error keeping only the code.
func classify(err error) error {
	var se *smtp.SMTPError
	if errors.As(err, &se) {
		status := &egress.StatusError{Code: se.Code, SMTP: true}
		de := &channel.DeliveryError{Channel: ChannelName, StatusCode: se.Code, Class: egress.Classify(status), Err: status,
			Retryable: se.Code < 500}
		if !de.Retryable {
			return stream.Permanent(de)
		}
		return de
	}
	class := egress.Classify(err)
	if class == egress.ClassDenied {
		return stream.Permanent(&channel.DeliveryError{Channel: ChannelName, Class: class, Err: err})
	}
	return &channel.DeliveryError{Channel: ChannelName, Class: class, Retryable: true, Err: err}
}

// compose builds the MIME message.
func (c *Channel) compose(n channel.Notification) ([]byte, error) {
	title := cmp.Or(n.Title, n.Event+": "+n.Subject)
	data := Data{ID: n.EventID, Flow: n.Flow, Event: n.Event, Subject: n.Subject, Title: title, Text: n.Text,
		HTML: htmltemplate.HTML(n.HTML), ObservedAt: n.ObservedAt, UnsubscribeURL: n.UnsubscribeURL}
	var text, html bytes.Buffer
	if err := c.text.Execute(&text, data); err != nil {
		return nil, err
	}
	if err := c.html.Execute(&html, data); err != nil {
		return nil, err
	}
	return buildMIME(c.cfg.From, n.Recipient.Address, title, n.EventID, n.UnsubscribeURL, text.Bytes(), html.Bytes()), nil
}

// buildMIME returns a multipart/alternative message (text, then HTML, both
// quoted-printable UTF-8) with CRLF line ends.
func buildMIME(from, to, subject, id, unsubscribeURL string, text, html []byte) []byte {
	var b bytes.Buffer
	h := func(k, v string) { b.WriteString(k + ": " + v + "\r\n") }
	h("From", from)
	h("To", to)
	h("Subject", mime.QEncoding.Encode("utf-8", oneLine(subject)))
	h("Date", time.Now().UTC().Format(time.RFC1123Z))
	if id != "" {
		h("Message-ID", "<"+oneLine(id)+"@dropstream>")
		h("X-Dropstream-Event-Id", oneLine(id))
	}
	if unsubscribeURL != "" {
		h("List-Unsubscribe", "<"+oneLine(unsubscribeURL)+">")
		h("List-Unsubscribe-Post", "List-Unsubscribe=One-Click")
	}
	mw := multipart.NewWriter(&b)
	h("MIME-Version", "1.0")
	h("Content-Type", `multipart/alternative; boundary="`+mw.Boundary()+`"`)
	b.WriteString("\r\n")
	for _, part := range []struct {
		typ  string
		body []byte
	}{{"text/plain", text}, {"text/html", html}} {
		// Writes to a bytes.Buffer never fail.
		w, _ := mw.CreatePart(textproto.MIMEHeader{"Content-Type": {part.typ + "; charset=utf-8"},
			"Content-Transfer-Encoding": {"quoted-printable"}})
		qp := quotedprintable.NewWriter(w)
		_, _ = qp.Write(part.body)
		_ = qp.Close()
	}
	_ = mw.Close()
	return b.Bytes()
}

// oneLine removes line breaks from a header value.
func oneLine(s string) string {
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}
