package clip_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dropstream/dropstream/internal/clip"
)

func TestString_cutsAtARuneBoundary(t *testing.T) {
	for _, tc := range []struct {
		name   string
		s      string
		max    int
		want   string
		marked string // Marked's result
	}{
		{"short", "abc", 5, "abc", "abc"},
		{"exact", "abcde", 5, "abcde", "abcde"},
		{"ascii", "abcdef", 4, "abcd", "abcd…"},
		{"empty", "", 0, "", ""},
		{"zero max", "abc", 0, "", "…"},
		{"negative max", "abc", -1, "", "…"},
		{"two-byte rune kept whole", "aé", 3, "aé", "aé"},
		{"two-byte rune not split", "aéb", 2, "a", "a…"},
		{"three-byte rune not split", "ab€", 4, "ab", "ab…"},
		{"cut after a multibyte rune", "€€€", 6, "€€", "€€…"},
		{"four-byte rune not split", "a😀b", 4, "a", "a…"},
		{"four-byte rune at the limit", "a😀b", 5, "a😀", "a😀…"},
		{"only a multibyte rune", "😀", 3, "", "…"},
		{"invalid byte in the kept prefix dropped", "a\xffbcdef", 4, "abc", "abc…"},
		{"short invalid input unchanged", "a\xff", 2, "a\xff", "a\xff"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := clip.String(tc.s, tc.max)
			if got != tc.want {
				t.Fatalf("String(%q, %d) = %q, want %q", tc.s, tc.max, got, tc.want)
			}
			if len(tc.s) > tc.max && (!utf8.ValidString(got) || len(got) > max(tc.max, 0)) {
				t.Fatalf("String(%q, %d) = %q: want valid UTF-8 of at most %d bytes", tc.s, tc.max, got, tc.max)
			}
			if got := clip.Marked(tc.s, tc.max); got != tc.marked {
				t.Fatalf("Marked(%q, %d) = %q, want %q", tc.s, tc.max, got, tc.marked)
			}
		})
	}
}

func TestString_neverSplitsARune(t *testing.T) {
	s := strings.Repeat("aé€😀", 20)
	for n := 0; n <= len(s); n++ {
		got := clip.String(s, n)
		if !utf8.ValidString(got) || len(got) > n || !strings.HasPrefix(s, got) || len(got) < n-3 {
			t.Fatalf("String(s, %d) = %q (%d bytes): want the longest valid prefix of at most %d bytes", n, got, len(got), n)
		}
	}
}
