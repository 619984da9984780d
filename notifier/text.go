package notifier

import "strings"

// maxQuoted bounds outside input quoted in an error (clip.Marked).
const maxQuoted = 64

func hasControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f })
}
