package httpapi_test

import (
	"testing"
	"time"

	"github.com/dropstream/dropstream/flows/feed"
	"github.com/dropstream/dropstream/flows/feed/feedsim"
	"github.com/dropstream/dropstream/flows/feed/httpapi"
	"github.com/dropstream/dropstream/internal/testenv"
)

// The feed's API shows its polling figures: requests, the share answered
// 304, bytes, the next poll and why, in one feed and in the list.
func TestEtiquette_feedAPIShowsThePollingFigures(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			sim := feedsim.New(feedsim.RSS, item("a", "A"))
			sim.SetEtiquette(feedsim.Etiquette{MaxAge: 1800})
			h := newHarness(t, b, sim, feed.Feed{IncludeExisting: true, PollEvery: "10m"})
			srv := newAPI(t, h.flow)
			h.pollAt(t0)
			h.pollAt(t0.Add(time.Hour))
			var v httpapi.FeedView
			if st := call(t, srv, "GET", "/v1/feeds/"+h.feed.ID, nil, &v); st != 200 {
				t.Fatalf("GET feed: %d", st)
			}
			p := v.Polling
			if p.State != feed.FeedActive || p.Requests != 2 || p.NotModified != 1 || p.NotModifiedShare != 0.5 || p.Bytes != sim.Bytes() ||
				p.NextPoll == nil || !p.NextPoll.Equal(t0.Add(90*time.Minute)) || p.Interval != "30m0s" || p.IntervalReason != feed.ReasonFresh {
				t.Errorf("polling %+v, want active, 2 requests, half 304, %d bytes, next poll at t0+90m (fresh for 30m)", p, sim.Bytes())
			}
			var page struct {
				Items []httpapi.FeedView `json:"items"`
			}
			if st := call(t, srv, "GET", "/v1/feeds", nil, &page); st != 200 || len(page.Items) != 1 || page.Items[0].Polling.Requests != 2 {
				t.Errorf("list: %d %+v", st, page.Items)
			}
			if st := call(t, srv, "POST", "/v1/feeds/"+h.feed.ID+"/resume", nil, &v); st != 200 || v.Polling.State != feed.FeedActive || v.Polling.Requests != 2 {
				t.Errorf("resume of a polled feed: %d %+v, want it as it was", st, v.Polling)
			}
			if st := call(t, srv, "POST", "/v1/feeds/0123456789abcdef/resume", nil, nil); st != 404 {
				t.Errorf("resume of no feed: %d, want 404", st)
			}
		})
	}
}
