package notifier

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/internal/clip"
)

func TestSignature_roundTrip(t *testing.T) {
	secret, body := "whsec_test-secret-0123", []byte(`{"event":"availability.open"}`)
	at := time.Unix(1_750_000_000, 0)
	header := Sign(secret, body, at)
	if !strings.HasPrefix(header, "t=1750000000,v1=") || len(header) != len("t=1750000000,v1=")+64 {
		t.Fatalf("Sign = %q", header)
	}
	for _, now := range []time.Time{at, at.Add(4 * time.Minute), at.Add(-4 * time.Minute)} {
		if err := VerifySignature(secret, header, body, now, 0); err != nil {
			t.Errorf("VerifySignature at %v: %v", now.Sub(at), err)
		}
	}
	// Several v1 values (secret rotation): one matching is enough.
	rotated := "t=1750000000,v1=" + strings.Repeat("ab", 32) + "," + strings.TrimPrefix(header, "t=1750000000,")
	if err := VerifySignature(secret, rotated, body, at, time.Minute); err != nil {
		t.Errorf("VerifySignature with two v1: %v", err)
	}
}

func TestVerifySignature_rejects(t *testing.T) {
	secret, body := "whsec_test-secret-0123", []byte(`{"a":1}`)
	at := time.Unix(1_750_000_000, 0)
	good := Sign(secret, body, at)
	sig := strings.TrimPrefix(good, "t=1750000000,v1=")
	tests := []struct {
		name      string
		secret    string
		header    string
		body      []byte
		now       time.Time
		tolerance time.Duration
		want      error
	}{
		{"other secret", "whsec_other-secret-0123", good, body, at, 0, ErrSignatureMismatch},
		{"tampered body", secret, good, []byte(`{"a":2}`), at, 0, ErrSignatureMismatch},
		{"other timestamp", secret, "t=1750000001,v1=" + sig, body, at, 0, ErrSignatureMismatch},
		{"flipped signature", secret, "t=1750000000,v1=" + strings.Repeat("0", 64), body, at, 0, ErrSignatureMismatch},
		{"stale", secret, good, body, at.Add(6 * time.Minute), 0, ErrSignatureStale},
		{"from the future", secret, good, body, at.Add(-2 * time.Minute), time.Minute, ErrSignatureStale},
		{"empty header", secret, "", body, at, 0, ErrSignatureMalformed},
		{"no v1", secret, "t=1750000000", body, at, 0, ErrSignatureMalformed},
		{"no t", secret, "v1=" + sig, body, at, 0, ErrSignatureMalformed},
		{"t twice", secret, "t=1750000000,t=1750000000,v1=" + sig, body, at, 0, ErrSignatureMalformed},
		{"t not a number", secret, "t=yesterday,v1=" + sig, body, at, 0, ErrSignatureMalformed},
		{"negative t", secret, "t=-5,v1=" + sig, body, at, 0, ErrSignatureMalformed},
		{"v1 not hex", secret, "t=1750000000,v1=" + strings.Repeat("z", 64), body, at, 0, ErrSignatureMalformed},
		{"v1 short", secret, "t=1750000000,v1=abcd", body, at, 0, ErrSignatureMalformed},
		{"element without =", secret, "t=1750000000,v1", body, at, 0, ErrSignatureMalformed},
		{"huge header", secret, good + strings.Repeat(",x=1", 300), body, at, 0, ErrSignatureMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := VerifySignature(tt.secret, tt.header, tt.body, tt.now, tt.tolerance)
			if !errors.Is(err, tt.want) {
				t.Errorf("VerifySignature = %v, want %v", err, tt.want)
			}
		})
	}
}

func FuzzVerifySignature(f *testing.F) {
	at := time.Unix(1_750_000_000, 0)
	f.Add(Sign("secret-secret-secret", []byte("{}"), at), []byte("{}"))
	f.Add("t=1,v1=", []byte(nil))
	f.Add("t="+strconv.Itoa(1<<62)+",v1=00", []byte("x"))
	f.Fuzz(func(t *testing.T, header string, body []byte) {
		err := VerifySignature("secret-secret-secret", header, body, at, time.Minute)
		if err != nil && !errors.Is(err, ErrSignatureMalformed) && !errors.Is(err, ErrSignatureStale) && !errors.Is(err, ErrSignatureMismatch) {
			t.Errorf("unclassified error %v", err)
		}
	})
}

// VerifySignature checks an X-Dropstream-Signature header: one t within
// tolerance of now, and one of its v1 values equal to the HMAC of
// "<t>.<body>". Errors wrap ErrSignatureMalformed, ErrSignatureStale or
// ErrSignatureMismatch.
func VerifySignature(secret, header string, body []byte, now time.Time, tolerance time.Duration) error {
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
	if len(sigs) == 0 && ts != "" {
		return fmt.Errorf("%w: no v1 signature", ErrSignatureMalformed)
	}
	if _, err := checkTimestamp("t", ts, now, tolerance); err != nil {
		return err
	}
	want := mac(secret, []byte(ts), body)
	for _, sig := range sigs {
		if hmac.Equal(sig, want) {
			return nil
		}
	}
	return ErrSignatureMismatch
}

// DefaultSignatureTolerance is the clock skew a zero tolerance accepts.
const DefaultSignatureTolerance = 5 * time.Minute

// maxSignatureHeader bounds the signature header a verifier parses.
const maxSignatureHeader = 1024

// Errors of VerifyWebhook, for errors.Is.
var (
	ErrSignatureMalformed = errors.New("notifier: malformed signature header")
	ErrSignatureStale     = errors.New("notifier: signature timestamp outside tolerance")
	ErrSignatureMismatch  = errors.New("notifier: signature mismatch")
)

// VerifyWebhook checks Standard Webhooks headers: id present, timestamp
// within tolerance of now, one "v1,<base64>" equal to SignStandard's.
// Errors wrap ErrSignatureMalformed, ErrSignatureStale or
// ErrSignatureMismatch.
func VerifyWebhook(secret string, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	id, ts, sigs := h.Get(HeaderWebhookID), h.Get(HeaderWebhookTimestamp), h.Get(HeaderWebhookSignature)
	if id == "" || ts == "" || sigs == "" || len(sigs) > maxSignatureHeader {
		return fmt.Errorf("%w: want webhook-id, webhook-timestamp and webhook-signature (at most %d bytes)", ErrSignatureMalformed, maxSignatureHeader)
	}
	sec, err := checkTimestamp("webhook-timestamp", ts, now, tolerance)
	if err != nil {
		return err
	}
	want := []byte(SignStandard(secret, id, body, time.Unix(sec, 0)))
	for sig := range strings.SplitSeq(sigs, " ") {
		if hmac.Equal([]byte(sig), want) {
			return nil
		}
	}
	return ErrSignatureMismatch
}

// checkTimestamp parses Unix time ts and checks it is within tolerance.
func checkTimestamp(name, ts string, now time.Time, tolerance time.Duration) (int64, error) {
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || sec <= 0 {
		return 0, fmt.Errorf("%w: %s %q is not a Unix time", ErrSignatureMalformed, name, clip.Marked(ts, maxQuoted))
	}
	if tolerance <= 0 {
		tolerance = DefaultSignatureTolerance
	}
	if skew := now.Sub(time.Unix(sec, 0)).Abs(); skew > tolerance {
		return 0, fmt.Errorf("%w: %s off, tolerance %s", ErrSignatureStale, skew.Truncate(time.Second), tolerance)
	}
	return sec, nil
}

// mac is the X-Dropstream-Signature HMAC of ts and body.
func mac(secret string, ts, body []byte) []byte {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write(ts)
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// SignStandard is the Webhook-Signature value of body sent as id at t.
func SignStandard(secret, id string, body []byte, t time.Time) string {
	return string(appendStandard(nil, secret, id, body, t))
}
