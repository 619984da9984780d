// Package clip bounds strings taken from outside input before they are
// quoted in an error message or kept in a record, without cutting a UTF-8
// character in two.
package clip

import (
	"strings"
	"unicode/utf8"
)

// Ellipsis is what Marked appends to a string it cut.
const Ellipsis = "…"

// String returns s unchanged when it is at most max bytes long. Otherwise
// it returns the longest prefix of s of at most max bytes that ends at a
// rune boundary, with any invalid UTF-8 in that prefix dropped, so the
// result is valid UTF-8 of at most max bytes. A max below 1 returns "" for
// any non-empty s.
func String(s string, max int) string {
	if len(s) <= max {
		return s
	}
	if max <= 0 {
		return ""
	}
	n := max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return strings.ToValidUTF8(s[:n], "")
}

// Marked is String followed by Ellipsis when s was cut, so a reader sees
// that the text goes on; the result is then up to max+len(Ellipsis) bytes.
func Marked(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return String(s, max) + Ellipsis
}

// HasControl reports whether s holds an ASCII control character.
func HasControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f })
}
