package watch

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier"
)

// sourceFlip is a source's health transition as the collector publishes
// it: a stable close when it goes down, an open when it is back.
func sourceFlip(id, kind string, n int, lastGood time.Time) flip {
	key := avail.SourceKey(id)
	attrs := map[string]string{"status": "down", "consecutive_failures": "3"}
	tr := avail.Transition{EventID: avail.EventID(runID(n), key, kind, true), ScopeKey: key, SourceID: id, Kind: kind,
		Stable: true, Notify: true, RunID: runID(n), RunAt: t0.Add(time.Duration(n) * time.Minute)}
	if kind == avail.KindClose {
		tr.LastSeen = lastGood
	} else {
		attrs = map[string]string{"status": "up", "consecutive_failures": "0", "blind_since": lastGood.Format(time.RFC3339Nano)}
		tr.LastSeen = tr.RunAt
	}
	tr.Entity = avail.Entity{Key: key, Kind: avail.EntitySource, Provider: "resy", Venue: id, Attrs: attrs}
	return flip{Transition: tr}
}

func TestStage_BlindSourceTellsServedWatchersOnceEachWay(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			sources := func(_ context.Context, id string) (SourceInfo, error) {
				if id != "src" {
					return SourceInfo{}, ErrSourceUnknown
				}
				return SourceInfo{Provider: "resy", Interval: time.Minute,
					Scopes: []avail.Scope{{Venue: "v1", Date: "2025-07-04", PartySize: 2}}}, nil
			}
			p := startPipelineWith(t, b.Client(t), testRunner(), Config{Sources: sources})
			e := slot("v1", "2025-07-04", "19:00", 2)
			p.webhookWatcher("venue", func(w *Watcher) { w.Provider, w.Venue = "resy", "v1" })
			p.webhookWatcher("slot", func(w *Watcher) { w.Slot = e.Key })
			p.webhookWatcher("muted", func(w *Watcher) { w.Provider, w.Venue, w.MuteSourceHealth = "resy", "v1", true })
			p.webhookWatcher("paused", func(w *Watcher) { w.Provider, w.Venue, w.Paused = "resy", "v1", true })
			p.webhookWatcher("otherdate", func(w *Watcher) { w.Provider, w.Venue, w.DateFrom = "resy", "v1", "2025-08-01" })
			p.webhookWatcher("othervenue", func(w *Watcher) { w.Provider, w.Venue = "resy", "v9" })
			p.webhookWatcher("tock", func(w *Watcher) { w.Provider = "tock" })

			lastGood := t0.Add(5 * time.Minute)
			p.publish(sourceFlip("src", avail.KindClose, 10, lastGood))
			p.settled(1)
			testenv.WaitFor(t, waitTimeout, func() bool { return p.notifications(notifier.OutcomeSent) == 2 }, "two down notices")
			// The same down again (a redelivery, a replay): told once.
			p.publish(sourceFlip("src", avail.KindClose, 10, lastGood))
			p.settled(2)
			testenv.WaitFor(t, waitTimeout, func() bool { return p.notifications(notifier.OutcomeDuplicate) == 2 }, "two duplicates")

			p.publish(sourceFlip("src", avail.KindOpen, 40, lastGood))
			p.settled(3)
			testenv.WaitFor(t, waitTimeout, func() bool { return p.notifications(notifier.OutcomeSent) == 4 }, "two up notices")

			blindFor := int64(35 * 60) // from the last good answer (minute 5) to the recovery (minute 40)
			for _, name := range []string{"venue", "slot"} {
				evs := p.recv.events(name)
				if len(evs) != 2 || evs[0].Event != EventSourceDown || evs[1].Event != EventSourceUp {
					t.Fatalf("%s got %+v, want a down then an up", name, evs)
				}
				down, up := evs[0], evs[1]
				if down.Source == nil || down.Source.SourceID != "src" || down.Source.Status != "down" || !down.Source.BlindSince.Equal(lastGood) ||
					down.EventID != avail.EventID(runID(10), avail.SourceKey("src"), avail.KindClose, true) || !strings.Contains(down.Text, "down") {
					t.Errorf("%s down notice %+v (source %+v)", name, down, down.Source)
				}
				if up.Source == nil || up.Source.Status != "up" || up.Source.BlindForSeconds != blindFor || up.BlindForSeconds != blindFor ||
					!strings.Contains(up.Text, "blind for 35 min") {
					t.Errorf("%s up notice %+v (source %+v), want blind for %ds", name, up, up.Source, blindFor)
				}
			}
			for _, name := range []string{"muted", "paused", "otherdate", "othervenue", "tock"} {
				if hits, _ := p.recv.counts(name); hits != 0 {
					t.Errorf("%s was told %d times, want 0", name, hits)
				}
			}

			// An opening first seen right after the blind period carries it;
			// one seen later (after the grace of two intervals) does not.
			p.publish(rawFlip(e, avail.KindOpen, 41), stableFlip(e, avail.KindOpen, 42, true))
			p.settled(5)
			testenv.WaitFor(t, waitTimeout, func() bool { return len(p.recv.events("slot")) == 3 }, "the opening")
			p.publish(rawFlip(e, avail.KindClose, 50), stableFlip(e, avail.KindClose, 51, true),
				rawFlip(e, avail.KindOpen, 60), stableFlip(e, avail.KindOpen, 61, true))
			p.settled(9)
			testenv.WaitFor(t, waitTimeout, func() bool { return len(p.recv.events("slot")) == 4 }, "the later opening")
			evs := p.recv.events("slot")
			if first := evs[2]; first.Event != EventAvailabilityOpen || first.BlindForSeconds != blindFor ||
				!strings.Contains(first.Text, "source was blind for 35 min") {
				t.Errorf("opening after the blind period = %+v, want blind_for_seconds %d and its text", first, blindFor)
			}
			if later := evs[3]; later.Event != EventAvailabilityOpen || later.BlindForSeconds != 0 || later.Text != "" {
				t.Errorf("later opening = %+v, want no blind period", later)
			}
			if dls := p.deadLetters(); len(dls) != 0 {
				t.Errorf("dead letters: %+v", dls)
			}
		})
	}
}

// Without a source lookup (or for a source since deleted) nobody is told
// of its health, but an opening after its blind period still carries it.
func TestStage_BlindWithoutSourceLookupStillAnnotatesOpenings(t *testing.T) {
	p := startPipeline(t, mini(t), testRunner())
	e := slot("v1", "2025-07-04", "19:00", 2)
	p.webhookWatcher("slot", func(w *Watcher) { w.Slot = e.Key })
	p.publish(sourceFlip("src", avail.KindClose, 10, t0), sourceFlip("src", avail.KindOpen, 20, t0))
	p.settled(2)
	p.publish(rawFlip(e, avail.KindOpen, 21), stableFlip(e, avail.KindOpen, 22, true))
	p.settled(4)
	testenv.WaitFor(t, waitTimeout, func() bool { return len(p.recv.events("slot")) == 1 }, "the opening")
	if ev := p.recv.events("slot")[0]; ev.Event != EventAvailabilityOpen || ev.BlindForSeconds != 20*60 {
		t.Errorf("opening %+v, want blind for 1200s", ev)
	}
}
