package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/flows/avail/watch"
	"github.com/dropstream/dropstream/internal/tenancy"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/digest"
	"github.com/dropstream/dropstream/notifier/subscriber"
	"github.com/dropstream/dropstream/notifier/throttle"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer"
)

// notifierStores exercises the notifier's Redis stores on the cluster:
// digest batches in the slots of several partitions, the throttle and the
// subscriber store (both in the single {notifier} slot).
func notifierStores(t *testing.T, nodes string) {
	ctx := context.Background()
	rdb := dial(t, nodes)

	// Digest: a batch of every 2 items per partition; an item filed twice
	// counts once; a full window is due, and done removes it.
	topic := stream.NewTopic("notify", "requests", 8)
	ds := digest.NewStore(rdb, time.Hour)
	p := digest.Policy{Mode: digest.ModeEvery, Every: 2}
	now := time.Now()
	for part := range topic.Partitions {
		tag := topic.HashTag(part)
		for i, item := range []string{"a", "a", "b", "c"} {
			w, err := ds.AddCounted(ctx, tag, "sub|dest", item, []byte(item), p, now)
			if err != nil {
				t.Fatalf("partition %d: AddCounted #%d: %v", part, i, err)
			}
			want := map[string]string{"a": "every:0", "b": "every:0", "c": "every:1"}[item]
			if w.ID != want {
				t.Fatalf("partition %d: item %s in window %s, want %s", part, item, w.ID, want)
			}
		}
		due, err := ds.Due(ctx, tag, now, 10)
		if err != nil || len(due) != 1 || due[0].Window != "every:0" || len(due[0].Keys) != 2 {
			t.Fatalf("partition %d: due %+v, %v; want the full window every:0 with a and b", part, due, err)
		}
		if err := ds.Done(ctx, due[0]); err != nil {
			t.Fatal(err)
		}
		if due, err := ds.Due(ctx, tag, now, 10); err != nil || len(due) != 0 {
			t.Fatalf("partition %d: due after done %+v, %v; want nothing", part, due, err)
		}
	}

	// Throttle: a burst of 2 per destination, then a wait; a block holds a
	// destination until its time.
	th, err := throttle.New(rdb, throttle.Config{Destination: throttle.Limit{Rate: 1, Burst: 2}})
	if err != nil {
		t.Fatal(err)
	}
	for i, wantWait := range []bool{false, false, true} {
		wait, err := th.Take(ctx, "https://a.example/hook", "webhook")
		if err != nil || (wait > 0) != wantWait {
			t.Fatalf("take #%d: wait %s, %v; want waiting %v", i+1, wait, err, wantWait)
		}
	}
	waits, errs := th.TakeMany(ctx, []throttle.Ask{{Dest: "https://b.example/hook", Channel: "webhook"}, {Dest: "https://c.example/hook", Channel: "webhook"}})
	for i := range waits {
		if errs[i] != nil || waits[i] != 0 {
			t.Fatalf("TakeMany #%d: wait %s, %v; want none", i, waits[i], errs[i])
		}
	}
	if err := th.Block(ctx, "https://b.example/hook", time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if wait, err := th.Take(ctx, "https://b.example/hook", "webhook"); err != nil || wait < 50*time.Second {
		t.Fatalf("take of a blocked destination: wait %s, %v; want about a minute", wait, err)
	}

	// Subscriber store: created once; the same destination again is refused.
	subs, err := subscriber.NewStore(rdb, subscriber.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	s := subscriber.Subscriber{Name: "cluster", Destinations: []subscriber.Destination{{Kind: subscriber.KindWebhook, Address: "https://hooks.example/cluster"}}}
	c, err := subs.Create(ctx, s)
	if err != nil || c.Subscriber.ID == "" || len(c.ConfirmTokens) != 1 {
		t.Fatalf("Create = %+v, %v; want a subscriber with one confirm token", c, err)
	}
	if got, err := subs.Get(ctx, c.Subscriber.ID); err != nil || got.Name != "cluster" {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	if _, err := subs.Create(ctx, s); err == nil {
		t.Error("a second subscriber with the same destination was created")
	}
}

// sweepProvider keeps projectionSweep's entities apart from the
// availability scenario's.
const sweepProvider = "sweeptest"

// projectionSweep applies entities of every partition to the projection
// on the cluster, lets some hashes expire and checks that Sweep removes
// exactly those from the indexes.
func projectionSweep(t *testing.T, nodes string) {
	const partitions, entities = 8, 24
	ctx := context.Background()
	rdb := dial(t, nodes)
	p, err := writer.NewProjection(rdb, writer.ProjectionConfig{Partitions: partitions}, stream.Telemetry{})
	if err != nil {
		t.Fatal(err)
	}
	topic := avail.NewTopics(partitions).Transitions
	var expired []string
	parts := map[int]bool{}
	for v := range entities {
		venue := fmt.Sprintf("sweep%d", v)
		e := avail.Entity{Key: avail.SlotKey(sweepProvider, venue, "2099-03-08", "19:00", 2), Kind: avail.EntitySlot,
			Provider: sweepProvider, Venue: venue, VenueName: "Venue " + venue, Date: "2099-03-08", Time: "19:00", PartySize: 2}
		runAt := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		tr := avail.Transition{EventID: avail.EventID("run-1", e.Key, "open", false), Entity: e, ScopeKey: "src|" + venue + "|2099-03-08|2|",
			SourceID: "src", Kind: "open", RunID: "run-1", RunAt: runAt, TraceID: fmt.Sprintf("%032x", v+1)}
		part := topic.Partition(tr.ScopeKey)
		parts[part] = true
		if res, err := p.Apply(ctx, part, tr); err != nil || res != writer.ResultOpened {
			t.Fatalf("Apply %s = %q, %v; want opened", e.Key, res, err)
		}
		if v%3 == 0 {
			// The hash expires (deleted here, as its expiry would).
			if err := rdb.Del(ctx, "ds:"+topic.HashTag(part)+":entity:"+e.Key).Err(); err != nil {
				t.Fatal(err)
			}
			expired = append(expired, e.Key)
		}
	}
	if len(parts) < 3 {
		t.Fatalf("entities in %d partitions, want several", len(parts))
	}
	removed, err := p.Sweep(ctx)
	if err != nil || removed != len(expired) {
		t.Fatalf("Sweep = %d, %v; want %d", removed, err, len(expired))
	}
	if removed, err := p.Sweep(ctx); err != nil || removed != 0 {
		t.Fatalf("second Sweep = %d, %v; want 0", removed, err)
	}
	live := 0
	cursor := ""
	for {
		items, next, err := p.List(ctx, writer.Filter{Provider: sweepProvider, State: writer.StateOpen}, cursor, 100)
		if err != nil {
			t.Fatal(err)
		}
		live += len(items)
		if next == "" {
			break
		}
		cursor = next
	}
	if live != entities-len(expired) {
		t.Errorf("%d open entities listed after the sweep, want %d", live, entities-len(expired))
	}
}

// watcherUpdate patches a watcher on the cluster (PATCH of a watcher):
// moved to another venue and renamed, it matches the new venue's slots
// and no longer the old one's, and reads back as patched.
func watcherUpdate(t *testing.T, nodes string) {
	ctx := context.Background()
	rdb := dial(t, nodes)
	store, err := watch.NewStore(rdb, watch.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	const provider = "updatetest"
	slot := func(venue string) avail.Entity {
		return avail.Entity{Key: avail.SlotKey(provider, venue, "2026-03-02", "19:00", 2), Kind: avail.EntitySlot,
			Provider: provider, Venue: venue, Date: "2026-03-02", Time: "19:00", PartySize: 2}
	}
	matches := func(venue string) []string {
		t.Helper()
		ws, err := store.Match(ctx, slot(venue))
		if err != nil {
			t.Fatalf("match a slot of %s: %v", venue, err)
		}
		var ids []string
		for _, w := range ws {
			ids = append(ids, w.ID)
		}
		return ids
	}
	w, err := store.Create(ctx, watch.Watcher{Name: "before", Provider: provider, Venue: "old",
		Channel: notifier.ChannelWebhook, WebhookURL: "https://hooks.example/update"})
	if err != nil {
		t.Fatal(err)
	}
	if got := matches("old"); !slices.Equal(got, []string{w.ID}) {
		t.Fatalf("before the update, a slot of the old venue matches %v, want %s", got, w.ID)
	}
	name, venue := "after", "new"
	up, err := store.UpdateIn(ctx, tenancy.View{All: true}, w.ID, watch.Patch{Name: &name, Venue: &venue})
	if err != nil || up.Name != "after" || up.Venue != "new" || up.ID != w.ID {
		t.Fatalf("Update = %+v, %v; want watcher %s renamed after, on venue new", up, err, w.ID)
	}
	if got, err := store.Get(ctx, w.ID); err != nil || got.Name != "after" || got.Venue != "new" {
		t.Fatalf("Get after the update = %+v, %v; want it patched", got, err)
	}
	if got := matches("new"); !slices.Equal(got, []string{w.ID}) {
		t.Errorf("a slot of the new venue matches %v, want %s", got, w.ID)
	}
	if got := matches("old"); len(got) != 0 {
		t.Errorf("a slot of the old venue still matches %v after the watcher moved", got)
	}
	missing := "gone"
	if _, err := store.UpdateIn(ctx, tenancy.View{All: true}, "w_0123456789abcdef0123456789ab", watch.Patch{Name: &missing}); !errors.Is(err, watch.ErrNotFound) {
		t.Errorf("update of an unknown watcher: %v, want ErrNotFound", err)
	}
}
