package feed

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/dropstream/dropstream/flows/feed/poll"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/subscriber"
	"github.com/dropstream/dropstream/stream"
)

// noSender is a Sender for flows that deliver nothing.
type noSender struct{}

func (noSender) Deliver(context.Context, notifier.Delivery) (string, error) { return "", nil }

// bareFlow is a flow whose stages do not run: tests call its handlers.
func bareFlow(t testing.TB, b testenv.Backend) *Flow {
	t.Helper()
	rdb := b.Client(t)
	subs, err := subscriber.NewStore(rdb, subscriber.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	notify := func(context.Context, ...notifier.Request) error { return nil }
	f, err := NewWith(rdb, stream.NewPublisher(rdb, stream.Telemetry{}), Deps{Subscribers: subs, Notify: notify, Sender: noSender{}}, Config{Partitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// applyPoll hands a poll of the given items (guid → title) to the
// assignment stage's handler.
func applyPoll(t *testing.T, f *Flow, feedID string, at time.Time, titles map[string]string) {
	t.Helper()
	p := Poll{FeedID: feedID, PolledAtMs: at.UnixMilli(), OK: true}
	for guid, title := range titles {
		it := poll.Item{GUID: guid, Title: title}
		it.Hash = poll.ContentHash(it)
		p.Items = append(p.Items, it)
	}
	body, _ := json.Marshal(p)
	if err := f.handlePoll(context.Background(), &stream.Message{Key: feedID, Type: TypePoll, Payload: body}); err != nil {
		t.Fatal(err)
	}
}

// The assignment script assigns an item exactly when assignable
// says: stable for AwaitStabilization and MinDelay old, or MaxDelay old.
// Each case polls one item, its title at each poll (an edit restarts its
// stability), and says after which poll it is first assigned; cases end
// there, since an assigned item's content is frozen.
func TestAssignScript_assignsWhenTheFeedsRuleSays(t *testing.T) {
	type step struct {
		minute int
		title  string
	}
	tests := []struct {
		name     string
		feed     Feed
		steps    []step
		assigned int // index of the first step after which the item is assigned; -1: never
	}{
		{"stable for await, min delay shorter", Feed{MinDelayMinutes: 5, AwaitStabilizationMinutes: 10, MaxDelayMinutes: 60},
			[]step{{0, "v"}, {9, "v"}, {10, "v"}}, 2},
		{"an edit restarts the stabilization", Feed{AwaitStabilizationMinutes: 10, MaxDelayMinutes: 60},
			[]step{{0, "v"}, {3, "w"}, {12, "w"}, {13, "w"}}, 3},
		{"min delay binds when the item is stable early", Feed{MinDelayMinutes: 30, AwaitStabilizationMinutes: 5, MaxDelayMinutes: 60},
			[]step{{0, "v"}, {10, "v"}, {29, "v"}, {30, "v"}}, 3},
		{"max delay assigns an item that never settles", Feed{MinDelayMinutes: 5, AwaitStabilizationMinutes: 10, MaxDelayMinutes: 20},
			[]step{{0, "a"}, {6, "b"}, {12, "c"}, {19, "d"}, {20, "e"}}, 4},
		{"zero delays assign at first sight", Feed{}, []step{{0, "v"}}, 0},
		{"not before max delay when never stable", Feed{AwaitStabilizationMinutes: 10, MaxDelayMinutes: 30},
			[]step{{0, "a"}, {9, "b"}, {18, "c"}, {27, "d"}}, -1},
	}
	for _, b := range testenv.Backends() {
		for _, tt := range tests {
			t.Run(b.Name+"/"+tt.name, func(t *testing.T) {
				f := bareFlow(t, b)
				tt.feed.URL, tt.feed.IncludeExisting = "https://example.org/feed.xml", true
				fd, _, err := f.store.PutFeed(t.Context(), tt.feed)
				if err != nil {
					t.Fatal(err)
				}
				// A collection that never completes keeps the item Assigned.
				if _, _, err := f.store.PutSubscribable(t.Context(), Subscribable{FeedID: fd.ID, Name: "big", Manager: Manager{Kind: EveryN, N: MaxEveryN}}); err != nil {
					t.Fatal(err)
				}
				first, stable, title := t0, t0, ""
				for i, s := range tt.steps {
					now := t0.Add(time.Duration(s.minute) * time.Minute)
					if title != "" && s.title != title {
						stable = now
					}
					title = s.title
					applyPoll(t, f, fd.ID, now, map[string]string{"g": s.title})
					items, err := f.Items(t.Context(), fd.ID, 0, 10)
					if err != nil || len(items) != 1 {
						t.Fatalf("items %+v (%v)", items, err)
					}
					want := StateUnassigned
					if tt.assigned >= 0 && i >= tt.assigned {
						want = StateAssigned
					}
					if got := items[0].State; got != want {
						t.Fatalf("after the poll at +%dm the item is %s, want %s", s.minute, got, want)
					}
					if ref := assignable(fd, first, stable, now); ref != (want == StateAssigned) {
						t.Errorf("at +%dm assignable says %v, the script %s", s.minute, ref, want)
					}
					if !items[0].FirstSeen.Equal(first) || !items[0].StableSince.Equal(stable) || !items[0].LastChecked.Equal(now) {
						t.Errorf("at +%dm first_seen %s, stable_since %s, last_checked %s; want %s, %s, %s", s.minute,
							items[0].FirstSeen, items[0].StableSince, items[0].LastChecked, first, stable, now)
					}
				}
			})
		}
	}
}

// assignable reports whether an item first seen at first and unchanged
// since stable may be assigned at now: the reference rule of the Lua script.
func assignable(f Feed, first, stable, now time.Time) bool {
	age, calm := now.Sub(first), now.Sub(stable)
	return (calm >= minutes(f.AwaitStabilizationMinutes) && age >= minutes(f.MinDelayMinutes)) || age >= minutes(f.MaxDelayMinutes)
}
