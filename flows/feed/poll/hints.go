package poll

import (
	"bytes"
	"cmp"
	"encoding/xml"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Bounds of the hints read from a feed.
const (
	// MaxHintLinks bounds the hub links kept from one document.
	MaxHintLinks = 4
	// maxHintTokens bounds the XML tokens read looking for hints before
	// the first item (a channel's head is short).
	maxHintTokens = 4096
)

// Hints are what a feed says about polling and subscribing: cache headers,
// <ttl>, <skipHours>, <skipDays> and WebSub links. Zero means unsaid.
type Hints struct {
	// FreshFor is Cache-Control's max-age, else Expires minus Date; zero for
	// no-cache, no-store or no readable header.
	FreshFor time.Duration `json:"fresh_for,omitempty"`
	// TTL is RSS's <ttl>, in minutes as the document gives it.
	TTL time.Duration `json:"ttl,omitempty"`
	// SkipHours are the UTC hours (0..23) RSS's <skipHours> asks not to
	// poll in.
	SkipHours []int `json:"skip_hours,omitempty"`
	// SkipDays are the weekdays RSS's <skipDays> asks not to poll on.
	SkipDays []time.Weekday `json:"skip_days,omitempty"`
	// Hubs are the WebSub hubs the feed names (rel="hub" links, or the
	// Link header), at most MaxHintLinks.
	Hubs []string `json:"hubs,omitempty"`
	// Self is the feed's own URL as it names it (rel="self"), the topic to
	// subscribe to at a hub.
	Self string `json:"self,omitempty"`
}

// cacheHints reads the freshness of an answer from its headers at now.
func cacheHints(h http.Header, now time.Time) time.Duration {
	cc := strings.ToLower(h.Get("Cache-Control"))
	for d := range strings.SplitSeq(cc, ",") {
		d = strings.TrimSpace(d)
		switch {
		case d == "no-cache" || d == "no-store":
			return 0
		case strings.HasPrefix(d, "max-age="):
			n, err := strconv.ParseInt(strings.Trim(strings.TrimPrefix(d, "max-age="), `"`), 10, 64)
			if err != nil || n <= 0 {
				return 0
			}
			return time.Duration(min(n, int64(365*24*3600))) * time.Second
		}
	}
	exp, err := http.ParseTime(h.Get("Expires"))
	if err != nil {
		return 0
	}
	base := now
	if date, err := http.ParseTime(h.Get("Date")); err == nil {
		base = date
	}
	if d := exp.Sub(base); d > 0 {
		return min(d, 365*24*time.Hour)
	}
	return 0
}

// linkHeaderHints reads WebSub links from Link headers:
// `<https://hub.example/>; rel="hub", <https://example.org/feed>; rel="self"`.
func linkHeaderHints(h http.Header, into *Hints) {
	for _, v := range h.Values("Link") {
		for part := range strings.SplitSeq(v, ",") {
			target, params, ok := strings.Cut(strings.TrimSpace(part), ";")
			target = strings.TrimSpace(target)
			if !ok || !strings.HasPrefix(target, "<") || !strings.HasSuffix(target, ">") {
				continue
			}
			href := target[1 : len(target)-1]
			for p := range strings.SplitSeq(params, ";") {
				k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
				if strings.EqualFold(k, "rel") {
					for rel := range strings.FieldsSeq(strings.ToLower(strings.Trim(val, `"`))) {
						into.addLink(rel, href)
					}
				}
			}
		}
	}
}

func (h *Hints) addLink(rel, href string) {
	href = strings.TrimSpace(href)
	if href == "" || len(href) > MaxLinkBytes || !strings.HasPrefix(href, "http") {
		return
	}
	switch rel {
	case "hub":
		if len(h.Hubs) < MaxHintLinks && !slices.Contains(h.Hubs, href) {
			h.Hubs = append(h.Hubs, href)
		}
	case "self":
		h.Self = cmp.Or(h.Self, href)
	}
}

// Weekdays are the weekdays by their lower-case English names.
var Weekdays = map[string]time.Weekday{"sunday": time.Sunday, "monday": time.Monday, "tuesday": time.Tuesday,
	"wednesday": time.Wednesday, "thursday": time.Thursday, "friday": time.Friday, "saturday": time.Saturday}

// DocumentHints reads a feed document's <ttl>, <skipHours>, <skipDays>
// and hub and self links; an unreadable document gives none.
func DocumentHints(body []byte) Hints {
	var h Hints
	d := xml.NewDecoder(bytes.NewReader(body))
	d.Strict = false
	var path []string
	var text strings.Builder
	for range maxHintTokens {
		tok, err := d.Token()
		if err != nil {
			break
		}
		switch t := tok.(type) {
		case xml.StartElement:
			name := strings.ToLower(t.Name.Local)
			if name == "item" || name == "entry" {
				return h
			}
			if name == "link" {
				var rel, href string
				for _, a := range t.Attr {
					switch strings.ToLower(a.Name.Local) {
					case "rel":
						rel = strings.ToLower(a.Value)
					case "href":
						href = a.Value
					}
				}
				h.addLink(rel, href)
			}
			path = append(path, name)
			text.Reset()
		case xml.CharData:
			if text.Len() < 64 {
				text.Write(t)
			}
		case xml.EndElement:
			if len(path) == 0 {
				continue
			}
			name, parent := path[len(path)-1], ""
			if len(path) > 1 {
				parent = path[len(path)-2]
			}
			v := strings.TrimSpace(text.String())
			switch {
			case name == "ttl" && parent == "channel":
				if n, err := strconv.Atoi(v); err == nil && n > 0 && n <= 366*24*60 {
					h.TTL = time.Duration(n) * time.Minute
				}
			case name == "hour" && parent == "skiphours":
				if n, err := strconv.Atoi(v); err == nil && n >= 0 && n <= 24 && len(h.SkipHours) < 24 {
					h.SkipHours = append(h.SkipHours, n%24) // RSS allows 24 for midnight
				}
			case name == "day" && parent == "skipdays":
				if wd, ok := Weekdays[strings.ToLower(v)]; ok && len(h.SkipDays) < 7 {
					h.SkipDays = append(h.SkipDays, wd)
				}
			}
			path = path[:len(path)-1]
			text.Reset()
		}
	}
	return h
}

// Merge adds the document's hints (DocumentHints) to those of the answer's
// headers: the document's links come after the Link header's.
func (h Hints) Merge(doc Hints) Hints {
	h.TTL, h.SkipHours, h.SkipDays = doc.TTL, doc.SkipHours, doc.SkipDays
	for _, hub := range doc.Hubs {
		h.addLink("hub", hub)
	}
	h.Self = cmp.Or(h.Self, doc.Self)
	return h
}
