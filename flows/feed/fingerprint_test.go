package feed

import (
	"testing"
	"time"

	"github.com/dropstream/dropstream/flows/feed/poll"
)

func TestDuplicate_fingerprintIsTheCanonicalLinkAndContent(t *testing.T) {
	base := poll.Item{GUID: "g1", Title: "T", Link: "https://Example.org:443/post/1/", Description: "d", Published: t0}
	same := func(edit func(*poll.Item)) poll.Item { it := base; edit(&it); return it }
	tests := []struct {
		name string
		it   poll.Item
		dup  bool
	}{
		{"another guid", same(func(i *poll.Item) { i.GUID = "g2" }), true},
		{"tracking parameters, case of the host, default port, trailing slash", same(func(i *poll.Item) {
			i.GUID, i.Link = "g3", "https://example.org/post/1?utm_source=rss&utm_medium=feed"
		}), true},
		{"another link", same(func(i *poll.Item) { i.Link = "https://example.org/post/2" }), false},
		{"another text", same(func(i *poll.Item) { i.Description = "d, edited" }), false},
		{"another date", same(func(i *poll.Item) { i.Published = t0.Add(time.Hour) }), false},
		{"a kept query parameter", same(func(i *poll.Item) { i.Link = "https://example.org/post/1?page=2" }), false},
	}
	fp := Fingerprint(base)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Fingerprint(tt.it) == fp; got != tt.dup {
				t.Errorf("same fingerprint %v, want %v", got, tt.dup)
			}
		})
	}
	if Fingerprint(poll.Item{GUID: "x", Title: "T"}) != "" {
		t.Error("an item without a link has a fingerprint")
	}
}
