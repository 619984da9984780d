package notifier

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dropstream/dropstream/internal/clip"
)

// Webhook request headers.
const (
	// HeaderSignature carries "t=<unix seconds>,v1=<hex HMAC-SHA256 of
	// "<t>.<body>" keyed with the watcher's secret>".
	HeaderSignature = "X-Dropstream-Signature"
	// HeaderEventID carries the notification's event id.
	HeaderEventID = "X-Dropstream-Event-Id"
)

// DefaultSignatureTolerance is the clock skew VerifySignature accepts when
// given a tolerance of zero.
const DefaultSignatureTolerance = 5 * time.Minute

// maxSignatureHeader bounds the header VerifySignature parses.
const maxSignatureHeader = 1024

// Errors of VerifySignature, for errors.Is.
var (
	ErrSignatureMalformed = errors.New("notifier: malformed signature header")
	ErrSignatureStale     = errors.New("notifier: signature timestamp outside tolerance")
	ErrSignatureMismatch  = errors.New("notifier: signature mismatch")
)

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

// VerifySignature checks a X-Dropstream-Signature header for receivers: the
// header must hold one t and at least one v1 (several are allowed, to
// rotate secrets), t must lie within tolerance of now (zero means
// DefaultSignatureTolerance), and one v1 must equal the HMAC of
// "<t>.<body>" with secret (compared in constant time). Errors wrap
// ErrSignatureMalformed, ErrSignatureStale or ErrSignatureMismatch.
func VerifySignature(secret, header string, body []byte, now time.Time, tolerance time.Duration) error {
	if tolerance <= 0 {
		tolerance = DefaultSignatureTolerance
	}
	if len(header) > maxSignatureHeader {
		return fmt.Errorf("%w: longer than %d bytes", ErrSignatureMalformed, maxSignatureHeader)
	}
	var ts string
	var sigs [][]byte
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return fmt.Errorf("%w: element %q is not key=value", ErrSignatureMalformed, clip.Marked(part, maxQuoted))
		}
		switch k {
		case "t":
			if ts != "" {
				return fmt.Errorf("%w: t given twice", ErrSignatureMalformed)
			}
			ts = v
		case "v1":
			sig, err := hex.DecodeString(v)
			if err != nil || len(sig) != sha256.Size {
				return fmt.Errorf("%w: v1 is not %d hex bytes", ErrSignatureMalformed, sha256.Size)
			}
			sigs = append(sigs, sig)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || sec <= 0 {
		return fmt.Errorf("%w: t %q is not a Unix time", ErrSignatureMalformed, clip.Marked(ts, maxQuoted))
	}
	if len(sigs) == 0 {
		return fmt.Errorf("%w: no v1 signature", ErrSignatureMalformed)
	}
	if skew := now.Sub(time.Unix(sec, 0)).Abs(); skew > tolerance {
		return fmt.Errorf("%w: %s off, tolerance %s", ErrSignatureStale, skew.Truncate(time.Second), tolerance)
	}
	want := mac(secret, []byte(ts), body)
	for _, sig := range sigs {
		if hmac.Equal(sig, want) {
			return nil
		}
	}
	return ErrSignatureMismatch
}
