package poll

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mmcdole/gofeed"

	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/internal/egress"
)

// Bounds of a parsed item's fields, in bytes. Longer values are cut at a
// rune boundary.
const (
	MaxGUIDBytes        = 1024
	MaxTitleBytes       = 1024
	MaxLinkBytes        = 2048
	MaxAuthorBytes      = 256
	MaxDescriptionBytes = 16 << 10
	// MaxItems is how many items of one feed are kept, first ones first.
	MaxItems = 500
)

// ErrMalformed: the body is not an RSS or Atom document gofeed can read.
var ErrMalformed = fmt.Errorf("poll: feed: %w", egress.ErrMalformed)

// Item is one entry of a feed, bounded and identified.
type Item struct {
	// GUID identifies the item within its feed: its guid or id, else "synth:"
	// and a hash of link and title (or description and author).
	GUID        string    `json:"guid"`
	Title       string    `json:"title,omitempty"`
	Link        string    `json:"link,omitempty"`
	Author      string    `json:"author,omitempty"`
	Description string    `json:"description,omitempty"`
	Published   time.Time `json:"published,omitzero"`
	// Hash is the content hash of title, link, author, description and
	// publication date: a change of any of them is an edit.
	Hash string `json:"hash"`
}

// Parsed is the outcome of Parse.
type Parsed struct {
	// Title is the feed's title.
	Title string
	// Items are the feed's items, duplicates removed (the first of a guid
	// wins), at most MaxItems.
	Items []Item
	// MissingGUIDs counts items whose guid was synthesized.
	MissingGUIDs int
	// DuplicateGUIDs counts items dropped because an earlier item had the
	// same guid.
	DuplicateGUIDs int
}

// Parse reads an RSS (0.9x, 1.0, 2.0) or Atom document. A body gofeed
// cannot read gives an error wrapping ErrMalformed.
func Parse(body []byte) (Parsed, error) {
	f, err := gofeed.NewParser().Parse(bytes.NewReader(body))
	if err != nil {
		// The parser's words may quote the document: only the class is kept.
		return Parsed{}, ErrMalformed
	}
	out := Parsed{Title: validText(f.Title, MaxTitleBytes)}
	seen := make(map[string]bool, len(f.Items))
	for _, gi := range f.Items {
		if gi == nil {
			continue
		}
		it, synthesized := toItem(gi)
		if seen[it.GUID] {
			out.DuplicateGUIDs++
			continue
		}
		if len(out.Items) >= MaxItems {
			continue // dropped
		}
		seen[it.GUID] = true
		if synthesized {
			out.MissingGUIDs++
		}
		out.Items = append(out.Items, it)
	}
	return out, nil
}

// toItem bounds a gofeed item and identifies it; synthesized reports a
// guid made from link and title.
func toItem(gi *gofeed.Item) (Item, bool) {
	it := Item{
		Title:       validText(strings.TrimSpace(gi.Title), MaxTitleBytes),
		Link:        validText(strings.TrimSpace(gi.Link), MaxLinkBytes),
		Description: validText(strings.TrimSpace(firstNonEmpty(gi.Content, gi.Description)), MaxDescriptionBytes),
	}
	if len(gi.Authors) > 0 && gi.Authors[0] != nil {
		it.Author = validText(strings.TrimSpace(firstNonEmpty(gi.Authors[0].Name, gi.Authors[0].Email)), MaxAuthorBytes)
	}
	switch {
	case gi.PublishedParsed != nil:
		it.Published = gi.PublishedParsed.UTC()
	case gi.UpdatedParsed != nil:
		it.Published = gi.UpdatedParsed.UTC()
	}
	guid := strings.TrimSpace(gi.GUID)
	synthesized := guid == ""
	switch {
	case synthesized && it.Link == "" && it.Title == "":
		// RSS 0.92 lets an item be only a description: link and title
		// would give every such item one guid, so its content names it.
		guid = "synth:" + digest("\n\n"+it.Description+"\n"+it.Author)
	case synthesized:
		guid = "synth:" + digest(it.Link+"\n"+it.Title)
	case len(guid) > MaxGUIDBytes || !utf8.ValidString(guid):
		guid = "long:" + digest(guid)
	}
	it.GUID = guid
	it.Hash = ContentHash(it)
	return it, synthesized
}

// ContentHash is the hash of the fields of an item a reader sees: title,
// link, author, description and publication date (not the guid).
func ContentHash(it Item) string {
	var b strings.Builder
	for _, s := range []string{it.Title, it.Link, it.Author, it.Description} {
		b.WriteString(s)
		b.WriteByte(0)
	}
	if !it.Published.IsZero() {
		b.WriteString(it.Published.UTC().Format(time.RFC3339))
	}
	return digest(b.String())[:32]
}

func digest(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if strings.TrimSpace(s) != "" {
			return s
		}
	}
	return ""
}

// validText returns valid UTF-8 (invalid bytes as U+FFFD) of at most n
// bytes, cut at a rune boundary.
func validText(s string, n int) string {
	return clip.String(strings.ToValidUTF8(s, "\uFFFD"), n)
}
