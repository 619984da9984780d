package notifier

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Webhook headers: Standard Webhooks (https://www.standardwebhooks.com)
// always, X-Dropstream ones with WebhookConfig.LegacySignature.
const (
	// HeaderWebhookID carries the notification's id, to deduplicate on.
	HeaderWebhookID = "Webhook-Id"
	// HeaderWebhookTimestamp carries the send's Unix time in seconds.
	HeaderWebhookTimestamp = "Webhook-Timestamp"
	// HeaderWebhookSignature carries "v1,<base64 HMAC-SHA256 of
	// "<id>.<timestamp>.<body>">" (see SignStandard).
	HeaderWebhookSignature = "Webhook-Signature"
	// HeaderSignature carries "t=<unix seconds>,v1=<hex HMAC-SHA256 of
	// "<t>.<body>" keyed with the watcher's secret>".
	HeaderSignature = "X-Dropstream-Signature"
	// HeaderEventID carries the notification's event id.
	HeaderEventID = "X-Dropstream-Event-Id"
)

// SignStandard returns "v1,<base64 HMAC-SHA256 of "<id>.<unix>.<body>">".
// The key is the base64 after "whsec_" for such secrets (as the spec's
// libraries), else the secret's bytes.
func SignStandard(secret, id string, body []byte, t time.Time) string {
	return string(appendStandard(nil, secret, id, body, t))
}

// signer is a hasher and buffers, pooled: crypto/hmac's two hashers and
// pads per key were a tenth of a send's allocations.
type signer struct {
	h        hash.Hash
	key, buf []byte
}

var signers = sync.Pool{New: func() any { return &signer{h: sha256.New()} }}

// appendStandard appends SignStandard's value to dst; the HMAC is RFC
// 2104's H(key^opad || H(key^ipad || message)).
func appendStandard(dst []byte, secret, id string, body []byte, t time.Time) []byte {
	s := signers.Get().(*signer)
	defer signers.Put(s)
	s.key = append(s.key[:0], secret...)
	if rest, ok := strings.CutPrefix(secret, "whsec_"); ok {
		s.buf = append(s.buf[:0], rest...)
		if key, err := base64.StdEncoding.AppendDecode(s.key[:0], s.buf); err == nil && len(key) > 0 {
			s.key = key
		} else {
			s.key = append(s.key[:0], secret...)
		}
	}
	if len(s.key) > sha256.BlockSize {
		s.h.Reset()
		s.h.Write(s.key)
		s.key = s.h.Sum(s.key[:0])
	}
	s.buf = strconv.AppendInt(append(append(pad(s.buf[:0], s.key, 0x36), id...), '.'), t.Unix(), 10)
	s.h.Reset()
	s.h.Write(append(s.buf, '.'))
	s.h.Write(body)
	s.buf = s.h.Sum(pad(s.buf[:0], s.key, 0x5c))
	s.h.Reset()
	s.h.Write(s.buf)
	s.buf = s.h.Sum(s.buf[:0])
	return base64.StdEncoding.AppendEncode(append(dst, "v1,"...), s.buf)
}

// pad appends key, zero-filled to a block, XORed with x.
func pad(dst, key []byte, x byte) []byte {
	for i := range sha256.BlockSize {
		c := x
		if i < len(key) {
			c ^= key[i]
		}
		dst = append(dst, c)
	}
	return dst
}

// Sign returns the X-Dropstream-Signature value of body sent at t.
func Sign(secret string, body []byte, t time.Time) string {
	b := make([]byte, 0, len("t=,v1=")+20+hex.EncodedLen(sha256.Size))
	b = strconv.AppendInt(append(b, "t="...), t.Unix(), 10)
	sum := mac(secret, b[len("t="):], body)
	return string(hex.AppendEncode(append(b, ",v1="...), sum))
}

func mac(secret string, ts, body []byte) []byte {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write(ts)
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}
