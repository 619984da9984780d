package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
)

// Class is the kind of an outbound exchange's failure: what the service
// keeps of it, with the status code, instead of the peer's answer.
type Class string

// The classes of Classify.
const (
	ClassNone       Class = ""            // no error.
	ClassDenied     Class = "denied"      // the egress policy refused the address.
	ClassTimeout    Class = "timeout"     // no complete answer in time.
	ClassDNS        Class = "dns"         // the host name did not resolve.
	ClassRefused    Class = "refused"     // the connection was refused or reset.
	ClassTLS        Class = "tls"         // the TLS handshake or the certificate failed.
	ClassHTTP4xx    Class = "http_4xx"    // the peer answered a 4xx status.
	ClassHTTP5xx    Class = "http_5xx"    // the peer answered a 5xx status.
	ClassSMTP4xx    Class = "smtp_4xx"    // the SMTP server answered a transient 4yz failure.
	ClassSMTP5xx    Class = "smtp_5xx"    // the SMTP server answered a permanent 5yz failure.
	ClassHTTPStatus Class = "http_status" // the peer answered another unexpected status (1xx, 3xx).
	ClassTooLarge   Class = "too_large"   // the answer exceeded its bound.
	ClassMalformed  Class = "malformed"   // the answer could not be read as what was expected.
	ClassNetwork    Class = "network"     // another network failure.
	ClassOther      Class = "other"       // anything else.
)

// ErrMalformed is wrapped by errors of answers that cannot be read as
// what was expected (Classify: ClassMalformed).
var ErrMalformed = errors.New("malformed answer")

// ErrTooLarge is wrapped by errors of answers over their size bound
// (Classify: ClassTooLarge).
var ErrTooLarge = errors.New("answer too large")

// StatusError is an unexpected status of a peer: its code only, never the
// text or body that came with it.
type StatusError struct {
	// Code is the HTTP status (or the SMTP reply code, with SMTP set).
	Code int
	// SMTP marks an SMTP reply code.
	SMTP bool
}

func (e *StatusError) Error() string {
	if e.SMTP {
		return "SMTP " + strconv.Itoa(e.Code)
	}
	return "HTTP " + strconv.Itoa(e.Code)
}

// Status returns a *StatusError for an HTTP status code.
func Status(code int) error { return &StatusError{Code: code} }

// Classify returns the class of an outbound exchange's error, looking
// through wrapped errors; ClassNone for nil.
func Classify(err error) Class {
	if err == nil {
		return ClassNone
	}
	var (
		se      *StatusError
		dnsErr  *net.DNSError
		netErr  net.Error
		opErr   *net.OpError
		recErr  tls.RecordHeaderError
		alert   tls.AlertError
		verify  *tls.CertificateVerificationError
		unknown x509.UnknownAuthorityError
		name    x509.HostnameError
		invalid x509.CertificateInvalidError
	)
	switch {
	case errors.Is(err, ErrDenied):
		return ClassDenied
	case errors.As(err, &se):
		return statusClass(se)
	case errors.Is(err, ErrTooLarge):
		return ClassTooLarge
	case errors.Is(err, ErrMalformed):
		return ClassMalformed
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return ClassTimeout
	case errors.As(err, &dnsErr):
		return ClassDNS
	case errors.As(err, &verify), errors.As(err, &unknown), errors.As(err, &name), errors.As(err, &invalid),
		errors.As(err, &recErr), errors.As(err, &alert):
		return ClassTLS
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET):
		return ClassRefused
	case errors.As(err, &opErr), errors.As(err, &netErr):
		return ClassNetwork
	}
	return ClassOther
}

func statusClass(se *StatusError) Class {
	if se.SMTP {
		if se.Code >= 500 {
			return ClassSMTP5xx
		}
		return ClassSMTP4xx
	}
	switch {
	case se.Code >= 400 && se.Code < 500:
		return ClassHTTP4xx
	case se.Code >= 500 && se.Code < 600:
		return ClassHTTP5xx
	}
	return ClassHTTPStatus
}

// Describe is the stored account of an exchange's error: its class and
// any status code, never the error's text, which may quote the peer.
func Describe(err error) string {
	if err == nil {
		return ""
	}
	class := Classify(err)
	var se *StatusError
	if errors.As(err, &se) {
		return fmt.Sprintf("%s: %s", class, se)
	}
	return string(class)
}
