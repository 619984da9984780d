// Package feedsim serves changing RSS 2.0 or Atom feeds, for tests and the
// demo, with ETag and Last-Modified validators and gzip.
package feedsim

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Item is one item of a simulated feed. An empty GUID is left out of the
// document (a feed with missing guids).
type Item struct {
	GUID        string
	Title       string
	Link        string
	Description string
	Published   time.Time
}

// Format of the served document.
const (
	RSS  = "rss"
	Atom = "atom"
)

// Etiquette is what a simulated feed says about how to poll it and where
// to subscribe to it. Zero fields are left out.
type Etiquette struct {
	// MaxAge is sent as Cache-Control: max-age (seconds).
	MaxAge int
	// TTL is RSS's <ttl> (minutes).
	TTL int
	// SkipHours (UTC, 0..23) and SkipDays ("Saturday") are RSS's
	// <skipHours> and <skipDays>.
	SkipHours []int
	SkipDays  []string
	// Hub and Self are the WebSub links (rel="hub", rel="self") of the
	// document.
	Hub, Self string
}

// Feed is a simulated feed, safe for concurrent use. Its zero value serves
// an empty RSS feed.
type Feed struct {
	mu        sync.Mutex
	format    string
	items     []Item
	modified  time.Time
	etiquette Etiquette
	requests  atomic.Int64
	notMod    atomic.Int64
	bytes     atomic.Int64
}

// SetEtiquette sets the feed's cache header, hints and WebSub links.
func (f *Feed) SetEtiquette(e Etiquette) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.etiquette = e
	f.modified = f.modified.Add(time.Second)
}

// New returns a feed in the given format (RSS or Atom) with items.
func New(format string, items ...Item) *Feed {
	return &Feed{format: format, items: items, modified: time.Unix(1_700_000_000, 0)}
}

// Set replaces the items, so the next poll sees new, edited and vanished
// items.
func (f *Feed) Set(items ...Item) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.items = append([]Item(nil), items...)
	f.modified = f.modified.Add(time.Second)
}

// Add appends items.
func (f *Feed) Add(items ...Item) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.items = append(f.items, items...)
	f.modified = f.modified.Add(time.Second)
}

// Requests returns how many requests were served, and how many of them
// were answered 304.
func (f *Feed) Requests() (all, notModified int64) { return f.requests.Load(), f.notMod.Load() }

// Bytes returns the body bytes served (before compression).
func (f *Feed) Bytes() int64 { return f.bytes.Load() }

// Document returns the current document and its ETag.
func (f *Feed) Document() ([]byte, string, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var doc []byte
	if f.format == Atom {
		doc = atomDoc(f.items, f.etiquette)
	} else {
		doc = rssDoc(f.items, f.etiquette)
	}
	h := sha256.Sum256(doc)
	return doc, `"` + hex.EncodeToString(h[:8]) + `"`, f.modified
}

// ServeHTTP serves the document.
func (f *Feed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	doc, etag, mod := f.Document()
	f.mu.Lock()
	maxAge := f.etiquette.MaxAge
	f.mu.Unlock()
	if maxAge > 0 {
		w.Header().Set("Cache-Control", fmt.Sprintf("max-age=%d", maxAge))
	}
	if inm := r.Header.Get("If-None-Match"); inm != "" && inm == etag {
		f.notMod.Add(1)
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("ETag", etag)
	w.Header().Set("Last-Modified", mod.UTC().Format(http.TimeFormat))
	if f.format == Atom {
		w.Header().Set("Content-Type", "application/atom+xml")
	} else {
		w.Header().Set("Content-Type", "application/rss+xml")
	}
	f.bytes.Add(int64(len(doc)))
	if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		w.Header().Set("Content-Encoding", "gzip")
		gz := gzip.NewWriter(w)
		_, _ = gz.Write(doc)
		_ = gz.Close()
		return
	}
	_, _ = w.Write(doc)
}

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

func rssDoc(items []Item, e Etiquette) []byte {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?><rss version="2.0" xmlns:atom="http://www.w3.org/2005/Atom"><channel><title>feedsim</title><link>http://feedsim.invalid/</link><description>simulated</description>`)
	if e.TTL > 0 {
		fmt.Fprintf(&b, "<ttl>%d</ttl>", e.TTL)
	}
	if len(e.SkipHours) > 0 {
		b.WriteString("<skipHours>")
		for _, h := range e.SkipHours {
			fmt.Fprintf(&b, "<hour>%d</hour>", h)
		}
		b.WriteString("</skipHours>")
	}
	if len(e.SkipDays) > 0 {
		b.WriteString("<skipDays>")
		for _, d := range e.SkipDays {
			fmt.Fprintf(&b, "<day>%s</day>", esc(d))
		}
		b.WriteString("</skipDays>")
	}
	if e.Hub != "" {
		fmt.Fprintf(&b, `<atom:link rel="hub" href="%s"/>`, esc(e.Hub))
	}
	if e.Self != "" {
		fmt.Fprintf(&b, `<atom:link rel="self" href="%s"/>`, esc(e.Self))
	}
	for _, it := range items {
		b.WriteString("<item>")
		if it.GUID != "" {
			fmt.Fprintf(&b, "<guid isPermaLink=\"false\">%s</guid>", esc(it.GUID))
		}
		fmt.Fprintf(&b, "<title>%s</title><link>%s</link><description>%s</description>", esc(it.Title), esc(it.Link), esc(it.Description))
		if !it.Published.IsZero() {
			fmt.Fprintf(&b, "<pubDate>%s</pubDate>", it.Published.UTC().Format(time.RFC1123Z))
		}
		b.WriteString("</item>")
	}
	b.WriteString("</channel></rss>")
	return []byte(b.String())
}

func atomDoc(items []Item, e Etiquette) []byte {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom"><title>feedsim</title><id>urn:feedsim</id><updated>2026-01-01T00:00:00Z</updated>`)
	if e.Hub != "" {
		fmt.Fprintf(&b, `<link rel="hub" href="%s"/>`, esc(e.Hub))
	}
	if e.Self != "" {
		fmt.Fprintf(&b, `<link rel="self" href="%s"/>`, esc(e.Self))
	}
	for _, it := range items {
		b.WriteString("<entry>")
		if it.GUID != "" {
			fmt.Fprintf(&b, "<id>%s</id>", esc(it.GUID))
		}
		fmt.Fprintf(&b, `<title>%s</title><link href="%s"/><summary>%s</summary>`, esc(it.Title), esc(it.Link), esc(it.Description))
		if !it.Published.IsZero() {
			fmt.Fprintf(&b, "<updated>%s</updated>", it.Published.UTC().Format(time.RFC3339))
		}
		b.WriteString("</entry>")
	}
	b.WriteString("</feed>")
	return []byte(b.String())
}

// Serve serves h on addr until ctx ends and returns the base URL.
func Serve(ctx context.Context, addr string, h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("feedsim: listen: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }() // Serve closes ln when it returns
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	return "http://" + ln.Addr().String(), nil
}
