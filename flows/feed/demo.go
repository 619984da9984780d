package feed

import (
	"context"
	"net/url"
	"strconv"
	"time"

	"github.com/dropstream/dropstream/flows/feed/feedsim"
	"github.com/dropstream/dropstream/internal/tick"
)

// DemoFeedPath is the path of the demo feed served in-process; demo feeds
// of earlier runs (other ports) are recognized by it and removed.
const DemoFeedPath = "/dropstream-demo-feed.xml"

// Demo serves an in-process feed gaining an item every 10 seconds, with a
// log subscription per item and per 3 items. It replaces earlier demo feeds.
func (f *Flow) Demo(ctx context.Context) error {
	st := f.store
	feeds, err := st.Feeds(ctx)
	if err != nil {
		return err
	}
	for _, fd := range feeds {
		if u, err := url.Parse(fd.URL); err == nil && u.Path == DemoFeedPath && u.Hostname() == "127.0.0.1" {
			subs, err := st.Subscribables(ctx, fd.ID)
			if err != nil {
				return err
			}
			for _, sb := range subs {
				if err := st.DeleteSubscribable(ctx, fd.ID, sb.Key()); err != nil {
					return err
				}
			}
			if err := st.DeleteFeed(ctx, fd.ID); err != nil {
				return err
			}
		}
	}
	items := []feedsim.Item{demoItem(1), demoItem(2)}
	sim := feedsim.New(feedsim.RSS, items...)
	base, err := feedsim.Serve(ctx, "127.0.0.1:0", sim)
	if err != nil {
		return err
	}
	// The poller may fetch this server, and no other loopback port.
	if u, err := url.Parse(base); err != nil {
		return err
	} else if err := f.cfg.Egress.Permit(u.Host); err != nil {
		return err
	}
	n := 2
	go tick.EveryAfter(ctx, 10*time.Second, func() {
		n++
		items = appendDemoItem(items, demoItem(n))
		sim.Set(items...)
	})
	fd, _, err := st.PutFeed(ctx, Feed{URL: base + DemoFeedPath, PollEvery: "5s", IncludeExisting: true})
	if err != nil {
		return err
	}
	managers := map[string]Manager{"demo-each": {Kind: EachItem}, "demo-every-3": {Kind: EveryN, N: 3}}
	for name, m := range managers {
		if _, _, err := st.PutSubscribable(ctx, Subscribable{FeedID: fd.ID, Name: name, Manager: m}); err != nil {
			return err
		}
		if _, _, err := f.Subscribe(ctx, fd.ID, name, Destination{Kind: DestLog, Name: "demo"}); err != nil {
			return err
		}
	}
	return nil
}

// demoFeedItems is how many items the demo feed shows: a document that
// grew for ever would be fetched and parsed whole at every poll.
const demoFeedItems = 20

// appendDemoItem appends it and keeps the latest demoFeedItems.
func appendDemoItem(items []feedsim.Item, it feedsim.Item) []feedsim.Item {
	items = append(items, it)
	return items[max(0, len(items)-demoFeedItems):]
}

func demoItem(n int) feedsim.Item {
	s := strconv.Itoa(n)
	return feedsim.Item{GUID: "demo-" + s, Title: "Demo item " + s, Link: "https://example.org/items/" + s,
		Description: "The demo feed's item number " + s + ".", Published: time.Now().UTC()}
}
