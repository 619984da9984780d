// Package slug checks the short names that key stored records and Redis
// keys: lowercase ASCII letters, digits, '_' and '-'.
package slug

import "strings"

// Valid reports whether s is 1..max characters of [a-z0-9_-].
func Valid(s string, max int) bool {
	return len(s) > 0 && len(s) <= max && strings.Trim(s, "abcdefghijklmnopqrstuvwxyz0123456789_-") == ""
}
