package email

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"mime"
	"mime/quotedprintable"
	"strings"
	"time"
)

// buildMIME returns a multipart/alternative message (text, then HTML, both
// quoted-printable UTF-8) with CRLF line ends.
func buildMIME(from, to, subject, id, unsubscribeURL string, text, html []byte) []byte {
	var rnd [12]byte
	_, _ = rand.Read(rnd[:]) // never fails (crypto/rand)
	boundary := "ds-" + hex.EncodeToString(rnd[:])
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
	h("MIME-Version", "1.0")
	h("Content-Type", `multipart/alternative; boundary="`+boundary+`"`)
	b.WriteString("\r\n")
	for _, part := range []struct {
		typ  string
		body []byte
	}{{"text/plain", text}, {"text/html", html}} {
		b.WriteString("--" + boundary + "\r\n")
		h("Content-Type", part.typ+"; charset=utf-8")
		h("Content-Transfer-Encoding", "quoted-printable")
		b.WriteString("\r\n")
		qp := quotedprintable.NewWriter(&b)
		_, _ = qp.Write(part.body) // writes to a bytes.Buffer never fail
		_ = qp.Close()
		b.WriteString("\r\n")
	}
	b.WriteString("--" + boundary + "--\r\n")
	return b.Bytes()
}

// oneLine removes line breaks from a header value.
func oneLine(s string) string {
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}
