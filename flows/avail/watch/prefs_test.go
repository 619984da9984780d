package watch

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier"
)

func TestWatcher_windowsMatchTheSlotsTime(t *testing.T) {
	// 2025-07-04 is a Friday.
	dinner := []Window{{Days: []string{"fri", "sat"}, From: "18:30", To: "21:00"}}
	tests := []struct {
		name string
		w    Watcher
		e    avail.Entity
		want bool
	}{
		{"inside", Watcher{Windows: dinner}, slot("v1", "2025-07-04", "19:00", 2), true},
		{"from is inclusive", Watcher{Windows: dinner}, slot("v1", "2025-07-04", "18:30", 2), true},
		{"to is exclusive", Watcher{Windows: dinner}, slot("v1", "2025-07-04", "21:00", 2), false},
		{"other weekday", Watcher{Windows: dinner}, slot("v1", "2025-07-03", "19:00", 2), false},
		{"every day", Watcher{Windows: []Window{{From: "12:00", To: "14:00"}}}, slot("v1", "2025-07-01", "12:15", 2), true},
		{"second window", Watcher{Windows: append([]Window{{From: "07:00", To: "08:00"}}, dinner...)}, slot("v1", "2025-07-05", "20:59", 2), true},
		{"to 24:00", Watcher{Windows: []Window{{From: "22:00", To: "24:00"}}}, slot("v1", "2025-07-05", "23:45", 2), true},
		{"whole day on a window's day", Watcher{Windows: dinner},
			avail.Entity{Key: avail.RestaurantKey("resy", "v1", "2025-07-05", 2), Kind: avail.EntityRestaurant, Provider: "resy", Venue: "v1", Date: "2025-07-05", Time: "*", PartySize: 2}, true},
		{"no date", Watcher{Windows: dinner}, avail.Entity{Key: "resy|v1", Provider: "resy", Venue: "v1"}, false},
		// A New York venue's 19:00 is 01:00 the next day in Paris.
		{"venue zone converted into the watcher's", Watcher{TimeZone: "Europe/Paris", Windows: []Window{{Days: []string{"sat"}, From: "00:30", To: "02:00"}}},
			withAttr(slot("v1", "2025-07-04", "19:00", 2), "time_zone", "America/New_York"), true},
		{"no venue zone: read as the watcher's", Watcher{TimeZone: "Europe/Paris", Windows: dinner}, slot("v1", "2025-07-04", "19:00", 2), true},
		{"unknown venue zone: read as the watcher's", Watcher{TimeZone: "Europe/Paris", Windows: dinner},
			withAttr(slot("v1", "2025-07-04", "19:00", 2), "time_zone", "Mars/Olympus"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.w.Matches(tt.e); got != tt.want {
				t.Errorf("Matches = %v, want %v", got, tt.want)
			}
		})
	}
}

func withAttr(e avail.Entity, k, v string) avail.Entity {
	e.Attrs = map[string]string{k: v}
	return e
}

func TestWatcher_validatesPreferences(t *testing.T) {
	base := Watcher{Name: "w", Provider: "resy", Channel: notifier.ChannelLog}
	tests := []struct {
		name string
		edit func(*Watcher)
		want string // "" valid
	}{
		{"all set", func(w *Watcher) {
			w.TimeZone, w.Windows, w.RearmAfterMinutes, w.NotifyGone, w.Provisional = "Europe/Paris", []Window{{Days: []string{"mon"}, From: "18:00", To: "22:00"}}, 30, true, true
		}, ""},
		{"unknown zone", func(w *Watcher) { w.TimeZone = "Europe/Atlantis" }, "time_zone"},
		{"zone too long", func(w *Watcher) { w.TimeZone = strings.Repeat("a", MaxTimeZoneLen+1) }, "time_zone longer"},
		{"bad time", func(w *Watcher) { w.Windows = []Window{{From: "7pm", To: "22:00"}} }, "HH:MM"},
		{"from after to", func(w *Watcher) { w.Windows = []Window{{From: "22:00", To: "18:00"}} }, "not before"},
		{"bad day", func(w *Watcher) { w.Windows = []Window{{Days: []string{"friday"}, From: "18:00", To: "22:00"}} }, "day"},
		{"day twice", func(w *Watcher) { w.Windows = []Window{{Days: []string{"fri", "fri"}, From: "18:00", To: "22:00"}} }, "day"},
		{"too many windows", func(w *Watcher) { w.Windows = make([]Window, MaxWindows+1) }, "at most"},
		{"rearm negative", func(w *Watcher) { w.RearmAfterMinutes = -1 }, "rearm_after_minutes"},
		{"rearm too long", func(w *Watcher) { w.RearmAfterMinutes = MaxRearmMinutes + 1 }, "rearm_after_minutes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := base
			tt.edit(&w)
			err := w.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tt.want != "" && (!errors.Is(err, ErrInvalidWatcher) || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate = %v, want an invalid watcher saying %q", err, tt.want)
			}
		})
	}
}

func TestStore_updatePatchesValidatesAndMovesTheIndex(t *testing.T) {
	ctx := context.Background()
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			s, err := NewStore(b.Client(t), StoreConfig{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			e := slot("v1", "2025-07-04", "19:00", 2)
			w, err := s.Create(ctx, Watcher{Name: "w", Provider: "resy", Venue: "v2", Channel: notifier.ChannelLog})
			if err != nil {
				t.Fatal(err)
			}
			venue, paused := "v1", true
			got, err := s.Update(ctx, w.ID, Patch{Venue: &venue, Paused: &paused})
			if err != nil || got.Venue != "v1" || !got.Paused || got.Name != "w" || got.Secret != "" || !got.CreatedAt.Equal(w.CreatedAt) {
				t.Fatalf("Update = %+v, %v; want venue v1, paused, the rest kept, no secret", got, err)
			}
			if ms, _ := s.Match(ctx, e); len(ms) != 1 || ms[0].ID != w.ID || !ms[0].Paused || ms[0].Secret != w.Secret {
				t.Errorf("Match after the venue moved = %+v, want the watcher, paused, with its secret", ms)
			}
			if ms, _ := s.Match(ctx, slot("v2", "2025-07-04", "19:00", 2)); len(ms) != 0 {
				t.Errorf("the old venue still matches %+v", ms)
			}
			bad := "webhook"
			if _, err := s.Update(ctx, w.ID, Patch{Channel: &bad}); !errors.Is(err, ErrInvalidWatcher) || !strings.Contains(err.Error(), "webhook_url") {
				t.Errorf("Update to a webhook without url = %v, want invalid", err)
			}
			if still, _ := s.Get(ctx, w.ID); still.Channel != notifier.ChannelLog {
				t.Errorf("a refused update changed the watcher: %+v", still)
			}
			if _, err := s.Update(ctx, "w_00000000000000000000000000ff", Patch{}); !errors.Is(err, ErrNotFound) {
				t.Errorf("Update of a missing watcher = %v, want ErrNotFound", err)
			}
			slotKey := e.Key
			if _, err := s.Update(ctx, w.ID, Patch{Slot: &slotKey}); err != nil {
				t.Fatal(err)
			}
			served, err := s.ServedBy(ctx, "resy", []avail.Scope{{Venue: "v1", Date: "2025-07-04", PartySize: 2}})
			if err != nil || len(served) != 1 || served[0].ID != w.ID {
				t.Errorf("ServedBy after the watcher became a slot watcher = %+v, %v", served, err)
			}
			if served, _ := s.ServedBy(ctx, "resy", []avail.Scope{{Venue: "v1", Date: "2025-07-05", PartySize: 2}}); len(served) != 0 {
				t.Errorf("a scope of another date serves %+v", served)
			}
			if err := s.Delete(ctx, w.ID); err != nil {
				t.Fatal(err)
			}
			if served, _ := s.ServedBy(ctx, "resy", []avail.Scope{{Venue: "v1", Date: "2025-07-04", PartySize: 2}}); len(served) != 0 {
				t.Errorf("a deleted watcher is still served: %+v", served)
			}
		})
	}
}

func TestStage_rearmGoneAndPause(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			p := startPipeline(t, b.Client(t), testRunner())
			ctx := context.Background()
			e := slot("v1", "2025-07-04", "19:00", 2)
			p.webhookWatcher("window", func(w *Watcher) { w.Slot = e.Key })
			p.webhookWatcher("rearm", func(w *Watcher) { w.Slot, w.RearmAfterMinutes, w.NotifyGone = e.Key, 30, true })
			paused := p.webhookWatcher("paused", func(w *Watcher) { w.Slot, w.NotifyGone = e.Key, true })
			pause := true
			if _, err := p.store.Update(ctx, paused.ID, Patch{Paused: &pause}); err != nil {
				t.Fatal(err)
			}
			// Window 1 (runs 1-2), closed 10 minutes (runs 10-11), window 2
			// (runs 20-21), closed 40 minutes (runs 30-31), window 3 (runs
			// 70-71).
			p.publish(rawFlip(e, avail.KindOpen, 1), stableFlip(e, avail.KindOpen, 2, true),
				rawFlip(e, avail.KindClose, 10), stableFlip(e, avail.KindClose, 11, true),
				rawFlip(e, avail.KindOpen, 20), stableFlip(e, avail.KindOpen, 21, true),
				rawFlip(e, avail.KindClose, 30), stableFlip(e, avail.KindClose, 31, true),
				rawFlip(e, avail.KindOpen, 70), stableFlip(e, avail.KindOpen, 71, true))
			p.settled(10)
			testenv.WaitFor(t, waitTimeout, func() bool { return len(p.recv.events("window")) == 3 }, "three windows told")
			testenv.WaitFor(t, waitTimeout, func() bool { return len(p.recv.events("rearm")) == 3 }, "rearm's notices")
			var got []string
			for _, ev := range p.recv.events("rearm") {
				got = append(got, ev.Event+"@"+ev.RunAt.Sub(t0).String())
			}
			// Window 2 reopened after 10 minutes (< 30): not told, and its
			// close neither; window 3 after 40 minutes: told.
			want := []string{EventAvailabilityOpen + "@2m0s", EventAvailabilityGone + "@11m0s", EventAvailabilityOpen + "@1h11m0s"}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("rearm watcher told %v, want %v", got, want)
			}
			if hits, _ := p.recv.counts("paused"); hits != 0 {
				t.Errorf("paused watcher told %d times", hits)
			}
			// Resumed: told again from the next window on.
			resume := false
			if _, err := p.store.Update(ctx, paused.ID, Patch{Paused: &resume}); err != nil {
				t.Fatal(err)
			}
			p.publish(rawFlip(e, avail.KindClose, 80), stableFlip(e, avail.KindClose, 81, true),
				rawFlip(e, avail.KindOpen, 90), stableFlip(e, avail.KindOpen, 91, true))
			p.settled(14)
			testenv.WaitFor(t, waitTimeout, func() bool { return len(p.recv.events("paused")) == 1 }, "the resumed watcher told")
			if ev := p.recv.events("paused")[0]; ev.Event != EventAvailabilityOpen || !ev.RunAt.Equal(t0.Add(91*60e9)) {
				t.Errorf("resumed watcher told %+v, want the opening of run 91", ev)
			}
		})
	}
}
