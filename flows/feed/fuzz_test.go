package feed

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dropstream/dropstream/flows/feed/feedsim"
	"github.com/dropstream/dropstream/flows/feed/poll"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// FuzzFeedPath fuzzes the whole path of a fetched body: a document that
// parses becomes a Poll that the assignment stage applies (both scripts)
// without error, twice (a redelivery) to the same effect, every parsed
// item then being an item of the feed under its guid and content hash.
// Package poll's FuzzParse covers the parser alone.
func FuzzFeedPath(f *testing.F) {
	when := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, sim := range []*feedsim.Feed{
		feedsim.New(feedsim.RSS, item("a", "A"), feedsim.Item{Title: "no guid", Link: "https://example.org/x"}, item("a", "dup")),
		feedsim.New(feedsim.Atom, feedsim.Item{GUID: "tag:x,2026:1", Title: "<b>&amp;</b>", Published: when}),
	} {
		doc, _, _ := sim.Document()
		f.Add(doc)
	}
	f.Add([]byte(`<rss version="2.0"><channel><item><guid>'; return {} --</guid><title>lua</title></item></channel></rss>`))
	fl := bareFlow(f, testenv.Backends()[0])
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, doc []byte) {
		parsed, err := poll.Parse(doc)
		if err != nil {
			return
		}
		ctx := context.Background()
		fd, _, err := fl.store.PutFeed(ctx, Feed{URL: fmt.Sprintf("https://example.org/%d.xml", n.Add(1)), IncludeExisting: true})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := json.Marshal(Poll{FeedID: fd.ID, PolledAtMs: when.UnixMilli(), OK: true, Items: parsed.Items})
		for range 2 {
			if err := fl.handlePoll(ctx, &stream.Message{Key: fd.ID, Type: TypePoll, Payload: body}); err != nil {
				t.Fatalf("poll of %d parsed items: %v", len(parsed.Items), err)
			}
		}
		items, err := fl.Items(ctx, fd.ID, 0, poll.MaxItems)
		if err != nil || len(items) != len(parsed.Items) {
			t.Fatalf("%d items (%v), want the %d parsed", len(items), err, len(parsed.Items))
		}
		for i, it := range items {
			want := parsed.Items[i]
			if it.GUID != want.GUID || it.Hash != want.Hash || it.IID != IID(want.GUID) || it.State != StateAssigned && it.State != StateCleared {
				t.Fatalf("item %d: %+v, want guid %q, hash %s, assigned or cleared", i, it, want.GUID, want.Hash)
			}
		}
	})
}
