package slug_test

import (
	"strings"
	"testing"

	"github.com/dropstream/dropstream/internal/slug"
)

func TestValid_acceptsOnlyShortLowercaseNames(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want bool
	}{
		{"venue-1_", true},
		{strings.Repeat("a", 8), true},
		{strings.Repeat("a", 9), false},
		{"", false},
		{"Venue", false},
		{"a b", false},
		{"a.b", false},
		{"café", false},
		{"a\xff", false},
	} {
		if got := slug.Valid(tc.s, 8); got != tc.want {
			t.Errorf("Valid(%q, 8) = %v, want %v", tc.s, got, tc.want)
		}
	}
}
