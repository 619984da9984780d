// Package bounds checks a setting against its range, with one wording of
// the error for every configuration.
package bounds

import (
	"cmp"
	"fmt"
)

// Check returns errs with "name v out of range lo..hi" appended when v is
// outside [lo, hi], and errs unchanged otherwise.
func Check[T cmp.Ordered](errs []error, name string, v, lo, hi T) []error {
	return CheckText(errs, name, v, lo, hi, fmt.Sprintf("%v..%v", lo, hi))
}

// CheckText is Check with the range written as text ("1KiB..64MiB"), for
// bounds that read better in their own units.
func CheckText[T cmp.Ordered](errs []error, name string, v, lo, hi T, text string) []error {
	return Require(errs, !(v < lo || v > hi), "%s %v out of range %s", name, v, text)
}

// Require returns errs with fmt.Errorf(format, args...) appended unless ok,
// for a rule that is not a range.
func Require(errs []error, ok bool, format string, args ...any) []error {
	if !ok {
		return append(errs, fmt.Errorf(format, args...))
	}
	return errs
}
