package feed

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/dropstream/dropstream/flows/feed/feedsim"
	"github.com/dropstream/dropstream/flows/feed/poll"
	"github.com/dropstream/dropstream/internal/egress/egresstest"
)

// simFeed is one simulated feed of a simulated day: its items, each
// published at its time, and what it says about polling it.
type simFeed struct {
	sim   *feedsim.Feed
	items []feedsim.Item
	shown int
}

// simProfiles builds n simulated feeds of four kinds, a quarter each:
// news updated about every 2h that sends Cache-Control max-age=3600; a
// blog with <ttl> 60..240 minutes posting every 3h; a feed posting hourly
// by day with <skipHours> 0..6 (UTC); a quiet feed posting every 6h with
// no hints, for the adaptive interval alone.
func simProfiles(n int, start time.Time) []*simFeed {
	out := make([]*simFeed, n)
	for i := range n {
		var every time.Duration
		var e feedsim.Etiquette
		switch i % 4 {
		case 0:
			every, e = 2*time.Hour, feedsim.Etiquette{MaxAge: 3600}
		case 1:
			every, e = 3*time.Hour, feedsim.Etiquette{TTL: 60 + 60*(i/4%4)}
		case 2:
			every, e = time.Hour, feedsim.Etiquette{SkipHours: []int{0, 1, 2, 3, 4, 5, 6}}
		default:
			every = 6 * time.Hour
		}
		f := &simFeed{sim: feedsim.New(feedsim.RSS)}
		f.sim.SetEtiquette(e)
		// items from a day before (the archive) to the end of the day,
		// each feed's phase its own
		phase := time.Duration(i*7919%int(every/time.Minute)) * time.Minute
		for at := start.Add(-24*time.Hour + phase); at.Before(start.Add(24 * time.Hour)); at = at.Add(every) {
			if i%4 == 2 && at.UTC().Hour() < 7 {
				continue // no posts in its skipped hours
			}
			id := strconv.Itoa(i) + "-" + strconv.FormatInt(at.Unix(), 10)
			f.items = append(f.items, feedsim.Item{GUID: id, Title: "Item " + id, Link: "https://example.org/" + id, Published: at})
		}
		out[i] = f
	}
	return out
}

// simResult are the figures of one simulated day.
type simResult struct {
	requests, notModified, bytes int64
	// delay sums the time from each item's publication to the poll that
	// first saw it; seen counts those items, missed those never seen.
	delay        time.Duration
	seen, missed int
}

// simulateDay polls every feed over a simulated day from start, through
// the real fetcher (conditional GETs over HTTP): every 15 minutes, or,
// with etiquette, as EtiquetteConfig.next schedules it from the answers'
// headers, the documents' hints and the feed's arrivals (as the observe
// script records them).
func simulateDay(t testing.TB, feeds []*simFeed, start time.Time, etiquette bool) simResult {
	mux := http.NewServeMux()
	for i, f := range feeds {
		mux.Handle("/f/"+strconv.Itoa(i), f.sim)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	now := start
	fetcher, err := poll.NewFetcher(poll.Config{RatePerHost: 1e6, Burst: 1 << 20, Egress: egresstest.Allow(t, srv.URL),
		Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	cfg := EtiquetteConfig{}.WithDefaults()
	const every = 15 * time.Minute
	var res simResult
	end := start.Add(24 * time.Hour)
	for i, f := range feeds {
		f.shown = 0
		var v poll.Validators
		var doc poll.Hints
		var arrivals []time.Time
		seen := map[string]bool{}
		for now = start.Add(time.Duration(i) * every / time.Duration(len(feeds))); now.Before(end); {
			n := 0
			for n < len(f.items) && !f.items[n].Published.After(now) {
				n++
			}
			if n != f.shown {
				f.sim.Set(f.items[:n]...)
				f.shown = n
			}
			resp, err := fetcher.Fetch(t.Context(), srv.URL+"/f/"+strconv.Itoa(i), v)
			if err != nil {
				t.Fatalf("simulated feed %d: %v", i, err)
			}
			res.requests++
			res.bytes += resp.Bytes
			if resp.NotModified {
				res.notModified++
			} else {
				v = resp.Validators
				p, err := poll.Parse(resp.Body)
				if err != nil {
					t.Fatal(err)
				}
				doc = poll.DocumentHints(resp.Body)
				arrived := false
				for _, it := range p.Items {
					if !seen[it.GUID] {
						seen[it.GUID] = true
						if it.Published.After(start) {
							res.delay += now.Sub(it.Published)
							res.seen++
							arrived = true
						}
					}
				}
				if arrived {
					arrivals = append([]time.Time{now}, arrivals...)[:min(len(arrivals)+1, cfg.History)]
				}
			}
			d := every
			if etiquette {
				d, _ = cfg.next(schedule{every: every, hints: resp.Hints.Merge(doc), arrivals: arrivals, now: now, maxBackoff: 6 * time.Hour})
			}
			now = now.Add(d)
		}
		for _, it := range f.items {
			if it.Published.After(start) && it.Published.Before(end) && !seen[it.GUID] {
				res.missed++
			}
		}
	}
	return res
}

func simFeedCount(def int) int {
	if n, err := strconv.Atoi(os.Getenv("DROPSTREAM_BENCH_SIM_FEEDS")); err == nil && n > 0 {
		return n
	}
	return def
}

// Over a simulated day, polling with etiquette (cache headers, ttl, skip
// hours, the adaptive interval) sends fewer requests than polling every
// 15 minutes, and still sees every item published before the day's end
// but the last ones, which the next day's first polls would see.
func TestEtiquette_savesRequestsOnASimulatedDay(t *testing.T) {
	start := t0.Truncate(24 * time.Hour)
	feeds := simProfiles(20, start)
	fixed := simulateDay(t, feeds, start, false)
	polite := simulateDay(t, feeds, start, true)
	if polite.requests >= fixed.requests/2 {
		t.Errorf("with etiquette %d requests, every 15m %d: want fewer than half", polite.requests, fixed.requests)
	}
	if fixed.missed > len(feeds) || polite.missed > 2*len(feeds) || polite.seen < fixed.seen-len(feeds) {
		t.Errorf("items seen/unseen by the day's end: every 15m %d/%d, with etiquette %d/%d; want at most a feed's last items unseen",
			fixed.seen, fixed.missed, polite.seen, polite.missed)
	}
}

// BenchmarkEtiquette_simulatedDay reports the requests, 304 answers and
// bytes of DROPSTREAM_BENCH_SIM_FEEDS simulated feeds (default 200) over
// one simulated day, polled every 15 minutes and with etiquette, and how
// long items waited to be seen. Run:
//
//	go test -run '^$' -bench Etiquette_simulatedDay -benchtime 1x ./flows/feed/
func BenchmarkEtiquette_simulatedDay(b *testing.B) {
	start := t0.Truncate(24 * time.Hour)
	n := simFeedCount(200)
	var fixed, polite simResult
	for b.Loop() {
		feeds := simProfiles(n, start)
		fixed = simulateDay(b, feeds, start, false)
		polite = simulateDay(b, feeds, start, true)
	}
	perFeed := func(v int64) float64 { return float64(v) / float64(n) }
	b.ReportMetric(perFeed(fixed.requests), "fixed_req/feed")
	b.ReportMetric(perFeed(polite.requests), "etiquette_req/feed")
	b.ReportMetric(100*(1-float64(polite.requests)/float64(fixed.requests)), "saved_%")
	b.ReportMetric(float64(fixed.notModified)/float64(fixed.requests), "fixed_304_share")
	b.ReportMetric(float64(polite.notModified)/float64(polite.requests), "etiquette_304_share")
	b.ReportMetric(perFeed(fixed.bytes)/1024, "fixed_KiB/feed")
	b.ReportMetric(perFeed(polite.bytes)/1024, "etiquette_KiB/feed")
	b.ReportMetric(fixed.delay.Minutes()/float64(max(fixed.seen, 1)), "fixed_delay_min")
	b.ReportMetric(polite.delay.Minutes()/float64(max(polite.seen, 1)), "etiquette_delay_min")
	b.ReportMetric(float64(polite.missed-fixed.missed), "etiquette_extra_unseen")
}
