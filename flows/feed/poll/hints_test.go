package poll

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"
)

var hintNow = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

func TestEtiquette_CacheControlAndExpiresGiveFreshness(t *testing.T) {
	tests := []struct {
		name   string
		header http.Header
		want   time.Duration
	}{
		{"max-age", http.Header{"Cache-Control": {"public, max-age=1800"}}, 30 * time.Minute},
		{"max-age wins over Expires", http.Header{"Cache-Control": {"max-age=60"}, "Expires": {"Mon, 02 Mar 2026 12:00:00 GMT"}}, time.Minute},
		{"no-cache", http.Header{"Cache-Control": {"no-cache, max-age=600"}}, 0},
		{"Expires against Date", http.Header{"Expires": {"Mon, 02 Mar 2026 11:00:00 GMT"}, "Date": {"Mon, 02 Mar 2026 10:00:00 GMT"}}, time.Hour},
		{"Expires against now", http.Header{"Expires": {"Mon, 02 Mar 2026 09:20:00 GMT"}}, 20 * time.Minute},
		{"Expires in the past", http.Header{"Expires": {"Mon, 02 Mar 2026 08:00:00 GMT"}}, 0},
		{"unreadable", http.Header{"Cache-Control": {"max-age=soon"}, "Expires": {"0"}}, 0},
		{"absurd max-age is capped at a year", http.Header{"Cache-Control": {"max-age=99999999999"}}, 365 * 24 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := cacheHints(tt.header, hintNow); got != tt.want {
				t.Errorf("freshness %v, want %v", got, tt.want)
			}
		})
	}
}

func TestEtiquette_documentHints(t *testing.T) {
	rss := `<?xml version="1.0"?><rss version="2.0" xmlns:atom="http://www.w3.org/2005/Atom"><channel><title>t</title>
<ttl>90</ttl><skipHours><hour>0</hour><hour>1</hour><hour>24</hour></skipHours><skipDays><day>Saturday</day><day>Sunday</day></skipDays>
<atom:link rel="hub" href="https://hub.example/"/><atom:link rel="self" href="https://example.org/feed.xml"/>
<item><title>i</title><ttl>5</ttl><link>https://example.org/not-a-hub</link></item></channel></rss>`
	atom := `<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom"><title>a</title>
<link rel="self" href="https://example.org/atom.xml"/><link rel="hub" href="https://hub-a.example/"/><link rel="hub" href="https://hub-b.example/"/>
<entry><id>x</id><link rel="hub" href="https://evil.example/"/></entry></feed>`
	tests := []struct {
		name string
		doc  string
		want Hints
	}{
		{"rss", rss, Hints{TTL: 90 * time.Minute, SkipHours: []int{0, 1, 0}, SkipDays: []time.Weekday{time.Saturday, time.Sunday},
			Hubs: []string{"https://hub.example/"}, Self: "https://example.org/feed.xml"}},
		{"atom", atom, Hints{Hubs: []string{"https://hub-a.example/", "https://hub-b.example/"}, Self: "https://example.org/atom.xml"}},
		{"not xml", "ttl 5", Hints{}},
		{"bad values", `<rss><channel><ttl>-3</ttl><skipHours><hour>25</hour></skipHours><skipDays><day>Caturday</day></skipDays></channel></rss>`, Hints{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := DocumentHints([]byte(tt.doc)); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("hints %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestEtiquette_linkHeaderHubs(t *testing.T) {
	h := http.Header{"Link": {`<https://hub.example/>; rel="hub", <https://example.org/feed>; rel="self"`, `<https://hub2.example/>; rel=hub`}}
	var got Hints
	linkHeaderHints(h, &got)
	want := Hints{Hubs: []string{"https://hub.example/", "https://hub2.example/"}, Self: "https://example.org/feed"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("hints %+v, want %+v", got, want)
	}
	if merged := got.Merge(Hints{TTL: time.Hour, Hubs: []string{"https://hub.example/", "https://hub3.example/"}}); len(merged.Hubs) != 3 || merged.TTL != time.Hour {
		t.Errorf("merged %+v: want three distinct hubs and the document's ttl", merged)
	}
}

// A fetch reports the answer's status, size and freshness; a chain of
// permanent redirects gives where the feed moved, any temporary one in it
// none; 410 is ErrGone.
func TestEtiquette_fetchRedirectsGoneAndFigures(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/301":
			http.Redirect(w, r, "/308", http.StatusMovedPermanently)
		case "/308":
			http.Redirect(w, r, "/feed", http.StatusPermanentRedirect)
		case "/302":
			http.Redirect(w, r, "/301", http.StatusFound)
		case "/gone":
			w.WriteHeader(http.StatusGone)
		default:
			w.Header().Set("Cache-Control", "max-age=600")
			w.Header().Set("Link", `<https://hub.example/>; rel="hub"`)
			_, _ = w.Write([]byte(rss20))
		}
	}))
	defer srv.Close()
	f := newFetcher(t, Config{})
	for path, moved := range map[string]string{"/feed": "", "/301": srv.URL + "/feed", "/308": srv.URL + "/feed", "/302": ""} {
		r, err := f.Fetch(t.Context(), srv.URL+path, Validators{})
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if r.MovedTo != moved || r.Status != 200 || r.Bytes != int64(len(rss20)) || r.Hints.FreshFor != 10*time.Minute || len(r.Hints.Hubs) != 1 {
			t.Errorf("%s: moved to %q, status %d, %d bytes, hints %+v; want moved to %q, 200, %d bytes, fresh 10m, one hub",
				path, r.MovedTo, r.Status, r.Bytes, r.Hints, moved, len(rss20))
		}
	}
	if _, err := f.Fetch(t.Context(), srv.URL+"/gone", Validators{}); !errors.Is(err, ErrGone) || !errors.Is(err, ErrStatus) {
		t.Errorf("410: %v, want ErrGone", err)
	}
}
