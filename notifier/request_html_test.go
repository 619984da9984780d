package notifier

import (
	"errors"
	"strings"
	"testing"
)

func TestRequest_validateHTML(t *testing.T) {
	base := Request{Flow: "feed", Event: "feed.collection", Subject: "feed:1/daily", Window: "w",
		SubscriberID: "s_0123456789ab0123456789abcdef"}
	if err := base.Validate(); err != nil {
		t.Fatalf("base request: %v", err)
	}
	tests := []struct {
		name string
		html string
		ok   bool
	}{
		{"none", "", true},
		{"a fragment with newlines and tabs", "<ul>\n\t<li><a href=\"https://x.test/?a=1&amp;b=2\">x</a></li>\n</ul>", true},
		{"at the limit", strings.Repeat("a", MaxHTMLLen), true},
		{"over the limit", strings.Repeat("a", MaxHTMLLen+1), false},
		{"invalid UTF-8", "<p>\xff</p>", false},
		{"a control character", "<p>\x00</p>", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := base
			r.HTML = tt.html
			err := r.Validate()
			if (err == nil) != tt.ok {
				t.Fatalf("Validate() = %v, want ok %v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidRequest) {
				t.Errorf("Validate() = %v, want ErrInvalidRequest", err)
			}
		})
	}
}
