package poll

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const rss091 = `<?xml version="1.0"?>
<!DOCTYPE rss PUBLIC "-//Netscape Communications//DTD RSS 0.91//EN" "http://my.netscape.com/publish/formats/rss-0.91.dtd">
<rss version="0.91"><channel><title>Old news</title><link>http://example.org/</link><description>d</description>
<item><title>First</title><link>http://example.org/1</link><description>one</description></item>
<item><title>Second</title><link>http://example.org/2</link></item>
</channel></rss>`

const rss090 = `<?xml version="1.0"?>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://my.netscape.com/rdf/simple/0.9/">
<channel><title>Mozilla Dot Org</title><link>http://www.mozilla.org</link><description>d</description></channel>
<item><title>New Status Updates</title><link>http://www.mozilla.org/status/</link></item>
<item><title>Bugzilla Reorganized</title><link>http://www.mozilla.org/bugs/</link></item>
</rdf:RDF>`

// rss092 has items made of a description only, as RSS 0.92 allows: each
// keeps an identity of its own.
const rss092 = `<?xml version="1.0"?>
<rss version="0.92"><channel><title>Dave's notes</title><link>http://example.org/</link><description>d</description>
<item><description>First thought of the day.</description></item>
<item><description>Second thought.</description><enclosure url="http://example.org/a.mp3" length="1" type="audio/mpeg"/></item>
<item><title>Titled</title><link>http://example.org/t</link></item>
</channel></rss>`

const rss10 = `<?xml version="1.0"?>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://purl.org/rss/1.0/" xmlns:dc="http://purl.org/dc/elements/1.1/">
<channel rdf:about="http://example.org/"><title>RDF news</title><link>http://example.org/</link><description>d</description></channel>
<item rdf:about="http://example.org/a"><title>A</title><link>http://example.org/a</link><dc:creator>Willow</dc:creator><dc:date>2026-01-02T03:04:05Z</dc:date></item>
</rdf:RDF>`

const rss20 = `<?xml version="1.0" encoding="UTF-8"?>
<rss version="2.0"><channel><title>News</title><link>http://example.org/</link><description>d</description>
<item><guid>urn:x:1</guid><title>One &amp; only</title><link>http://example.org/1</link><author>b@slayers.org (Buffy)</author>
<description>&lt;p&gt;hello&lt;/p&gt;</description><pubDate>Mon, 02 Mar 2026 09:00:00 +0000</pubDate></item>
<item><guid>urn:x:1</guid><title>Duplicate</title></item>
<item><title>No guid</title><link>http://example.org/3</link></item>
</channel></rss>`

const atom = `<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom"><title>Atom news</title><id>urn:feed</id><updated>2026-01-01T00:00:00Z</updated>
<entry><id>tag:example.org,2026:1</id><title>Entry</title><link href="http://example.org/e1"/><author><name>Giles</name></author>
<updated>2026-01-01T10:00:00Z</updated><content type="html">&lt;b&gt;body&lt;/b&gt;</content></entry>
</feed>`

func TestParse_formats(t *testing.T) {
	tests := []struct {
		name       string
		doc        string
		title      string
		guids      []string // "" means synthesized
		firstTitle string
		firstLink  string
		author     string
		published  time.Time
		missing    int
		duplicates int
	}{
		{"rss 0.90", rss090, "Mozilla Dot Org", []string{"", ""}, "New Status Updates", "http://www.mozilla.org/status/", "", time.Time{}, 2, 0},
		{"rss 0.91", rss091, "Old news", []string{"", ""}, "First", "http://example.org/1", "", time.Time{}, 2, 0},
		{"rss 0.92, items of a description only", rss092, "Dave's notes", []string{"", "", ""}, "", "", "", time.Time{}, 3, 0},
		{"rss 1.0", rss10, "RDF news", []string{""}, "A", "http://example.org/a", "Willow", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), 1, 0},
		{"rss 2.0", rss20, "News", []string{"urn:x:1", ""}, "One & only", "http://example.org/1", "Buffy", time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC), 1, 1},
		{"atom", atom, "Atom news", []string{"tag:example.org,2026:1"}, "Entry", "http://example.org/e1", "Giles", time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC), 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse([]byte(tt.doc))
			if err != nil {
				t.Fatal(err)
			}
			if p.Title != tt.title || len(p.Items) != len(tt.guids) || p.MissingGUIDs != tt.missing || p.DuplicateGUIDs != tt.duplicates {
				t.Fatalf("parsed %q, %d items, %d missing, %d duplicate guids; want %q, %d, %d, %d",
					p.Title, len(p.Items), p.MissingGUIDs, p.DuplicateGUIDs, tt.title, len(tt.guids), tt.missing, tt.duplicates)
			}
			for i, g := range tt.guids {
				if got := p.Items[i].GUID; (g == "" && !strings.HasPrefix(got, "synth:")) || (g != "" && got != g) {
					t.Errorf("item %d guid %q, want %q", i, got, g)
				}
				if len(p.Items[i].Hash) != 32 {
					t.Errorf("item %d hash %q", i, p.Items[i].Hash)
				}
			}
			first := p.Items[0]
			if first.Title != tt.firstTitle || first.Link != tt.firstLink || first.Author != tt.author || !first.Published.Equal(tt.published) {
				t.Errorf("first item %+v", first)
			}
		})
	}
}

func TestParse_identityAndHash(t *testing.T) {
	a, _ := Parse([]byte(rss20))
	b, _ := Parse([]byte(strings.Replace(rss20, "One &amp; only", "One, edited", 1)))
	if a.Items[0].GUID != b.Items[0].GUID || a.Items[0].Hash == b.Items[0].Hash {
		t.Errorf("an edit keeps the guid and changes the hash: %+v vs %+v", a.Items[0], b.Items[0])
	}
	if a.Items[1].GUID != b.Items[1].GUID || a.Items[1].Hash != b.Items[1].Hash {
		t.Errorf("an unchanged item without guid keeps its synthesized guid and hash")
	}
	long := strings.Replace(rss20, "urn:x:1</guid><title>One", strings.Repeat("g", 5000)+"</guid><title>One", 1)
	c, err := Parse([]byte(long))
	if err != nil || !strings.HasPrefix(c.Items[0].GUID, "long:") || len(c.Items[0].GUID) > MaxGUIDBytes {
		t.Errorf("a 5000-byte guid became %q (%v)", validText(c.Items[0].GUID, 40), err)
	}
}

func TestParse_malformed(t *testing.T) {
	for _, doc := range []string{"", "not xml at all", `<rss version="2.0"><channel><item><title>cut`, `{"json": "feed?"`, `<html><body>hi</body></html>`} {
		if _, err := Parse([]byte(doc)); !errors.Is(err, ErrMalformed) {
			t.Errorf("Parse(%q) = %v, want ErrMalformed", doc, err)
		}
	}
}

func TestParse_boundsItemsAndFields(t *testing.T) {
	var b strings.Builder
	b.WriteString(`<rss version="2.0"><channel><title>t</title>`)
	for i := 0; i < MaxItems+20; i++ {
		b.WriteString("<item><guid>g" + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + "-" + time.Duration(i).String() + "</guid><title>" + strings.Repeat("é", 2000) + "</title></item>")
	}
	b.WriteString("</channel></rss>")
	p, err := Parse([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != MaxItems {
		t.Fatalf("%d items, want %d", len(p.Items), MaxItems)
	}
	if got := p.Items[0].Title; len(got) > MaxTitleBytes || !strings.HasPrefix(got, "éé") || strings.ContainsRune(got, '\uFFFD') {
		t.Errorf("title of %d bytes, cut inside a rune?", len(got))
	}
}

func FuzzParse(f *testing.F) {
	for _, doc := range []string{rss090, rss091, rss092, rss10, rss20, atom, "", "<rss>"} {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		p, err := Parse(doc)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if len(p.Items) > MaxItems {
			t.Fatalf("%d items", len(p.Items))
		}
		seen := map[string]bool{}
		for _, it := range p.Items {
			if it.GUID == "" || len(it.GUID) > MaxGUIDBytes || seen[it.GUID] || len(it.Title) > MaxTitleBytes ||
				len(it.Link) > MaxLinkBytes || len(it.Description) > MaxDescriptionBytes || it.Hash != ContentHash(it) {
				t.Fatalf("item out of bounds or duplicate: %+v", it)
			}
			seen[it.GUID] = true
		}
	})
}
