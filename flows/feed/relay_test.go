package feed

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/flows/feed/feedsim"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/stream"
)

func TestFlow_relaysEmailAndWebhookToTheNotifierRequestTopic(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			topic := notifier.RequestTopic(2)
			relay := func(f *Flow) {
				pub := stream.NewPublisher(f.rdb, stream.Telemetry{})
				f.cfg.Relay = func(ctx context.Context, r notifier.Request) error {
					return notifier.PublishRequests(ctx, pub, topic, r)
				}
			}
			sim := feedsim.New(feedsim.RSS, item("1", "one"), item("2", "two"))
			h := newHarness(t, b, sim, Feed{IncludeExisting: true}, relay)
			if _, _, err := h.flow.store.PutSubscribable(h.ctx, Subscribable{FeedID: h.feed.ID, Name: "pairs", Manager: Manager{Kind: EveryN, N: 2}}); err != nil {
				t.Fatal(err)
			}
			for _, d := range []Destination{{Kind: DestEmail, Address: "Buffy <b@slayers.org>"}, {Kind: DestWebhook, URL: "https://hooks.example.org/feed"}} {
				sub, _, err := h.flow.Subscribe(h.ctx, h.feed.ID, "pairs", d)
				if err != nil {
					t.Fatal(err)
				}
				h.settle() // its confirmation request goes out
				if _, err := h.flow.store.Confirm(h.ctx, sub.ConfirmToken); err != nil {
					t.Fatal(err)
				}
			}
			h.pollAt(t0)
			var got []string
			for p := 0; p < topic.Partitions; p++ {
				entries, err := h.rdb.XRange(h.ctx, topic.Stream(p), "-", "+").Result()
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range entries {
					var r notifier.Request
					if err := json.Unmarshal([]byte(e.Values["payload"].(string)), &r); err != nil {
						t.Fatal(err)
					}
					if err := r.Validate(); err != nil {
						t.Errorf("request %+v: %v", r, err)
					}
					got = append(got, r.Event+" "+r.Destination.Kind+" "+r.Window)
					if r.Event == "feed.collection" && (!strings.Contains(r.Text, "https://example.org/2") || !strings.Contains(string(r.Payload), `"guid":"1"`)) {
						t.Errorf("collection request without its items: %q %s", r.Text, r.Payload)
					}
				}
			}
			slices.Sort(got)
			want := []string{"feed.collection email 1", "feed.collection webhook 1", "feed.confirm email confirm:", "feed.confirm webhook confirm:"}
			for i := range got {
				if i < len(want) && strings.HasSuffix(want[i], ":") {
					got[i] = got[i][:strings.LastIndex(got[i], ":")+1]
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("requests %v, want %v", got, want)
			}
			if n := len(h.sink.messages("collection")); n != 0 {
				t.Errorf("%d collections went through the in-process sender too", n)
			}
			_ = time.Second
		})
	}
}
