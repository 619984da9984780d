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
// [CheckText]: Name is how the client calls it (the JSON field or query
// parameter), Value what it sent.
type TextField struct {
	Name, Value string
}

// Text returns the TextField name = value.
func Text(name, value string) TextField { return TextField{Name: name, Value: value} }

// CheckText refuses identifiers and names that would show something other
// than what they hold: it returns a 422 [*Error] with code
// [CodeInvalidText] naming the first field whose value holds a control
// character (C0, DEL, C1), a bidirectional formatting character (U+202A to
// U+202E, U+2066 to U+2069, U+200E, U+200F, U+061C) or another invisible
// format character (Unicode category Cf, e.g. U+200B), or that is not valid
// UTF-8; nil when every value is clean. Empty values pass: whether a field
// is required is the caller's rule.
//
// Use it on identifiers and short names (ids, venues, providers, titles),
// not on free text, where some of these characters are legitimate.
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

// DateQuery parses the optional query parameter name as a calendar date
// YYYY-MM-DD: "" when it is absent, a 400 "invalid_<name>" when it is not a
// real date (2026-13-45, 2026-02-30, 26-1-1).
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

// NotConfigured returns the 503 [*Error] of a route whose backend this
// process was not configured with, e.g. NotConfigured("ClickHouse",
// "DROPSTREAM_CLICKHOUSE_DSN"). Such routes stay registered and documented,
// so that clients see why they cannot be used instead of a 404.
func NotConfigured(backend, setting string) *Error {
	return NewError(http.StatusServiceUnavailable, CodeNotConfigured,
		backend+" is not configured on this server (set "+setting+")")
}
