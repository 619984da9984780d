package api

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
	"unicode"

	"github.com/gofiber/fiber/v2"
)

// CodeInvalidText is the envelope code of a [CheckText] refusal.
const CodeInvalidText = "invalid_text"

// TextField is one identifier or name taken from a request, for
// [CheckText]: Name is how the client calls it, Value what it sent.
type TextField struct {
	Name, Value string
}

// Text returns the TextField name = value.
func Text(name, value string) TextField { return TextField{Name: name, Value: value} }

// CheckText returns a 422 [*Error] with code [CodeInvalidText] naming the
// first field that holds a control, bidirectional formatting or invisible
// character, or invalid UTF-8; nil when every value is clean. Use it on
// identifiers and short names, not on free text.
func CheckText(fields ...TextField) error {
	for _, f := range fields {
		if r, bad := unsafeRune(f.Value); bad {
			return UnprocessableEntity(CodeInvalidText,
				fmt.Sprintf("%s must not contain control, invisible or bidirectional formatting characters (found %U)", f.Name, r))
		}
	}
	return nil
}

// unsafeRune returns the first rune of s that CheckText refuses.
func unsafeRune(s string) (rune, bool) {
	for _, r := range s {
		switch {
		case r == unicode.ReplacementChar:
			return r, true // invalid UTF-8 decodes to U+FFFD
		case unicode.IsControl(r),
			r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069, r == 0x200E, r == 0x200F, r == 0x061C,
			r == 0x200B, r >= 0x2060 && r <= 0x2064, r == 0xFEFF:
			return r, true
		}
	}
	return 0, false
}

// DateQuery reads the optional query parameter name as a date YYYY-MM-DD:
// "" when absent, a 400 "invalid_<name>" when not a real date.
func DateQuery(c *fiber.Ctx, name string) (string, error) {
	s := c.Query(name)
	if s == "" {
		return "", nil
	}
	if _, err := time.Parse(time.DateOnly, s); err != nil {
		return "", BadRequest("invalid_"+name, name+" must be a calendar date YYYY-MM-DD, got "+strconv.Quote(s))
	}
	return s, nil
}

// CodeNotConfigured is the envelope code of [NotConfigured].
const CodeNotConfigured = "not_configured"

// NotConfigured returns the 503 [*Error] of a route whose backend is not
// configured; such routes stay registered so clients see why, not a 404.
func NotConfigured(backend, setting string) *Error {
	return NewError(http.StatusServiceUnavailable, CodeNotConfigured,
		backend+" is not configured on this server (set "+setting+")")
}
