package watch

import (
	"testing"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier"
)

// rawCloseOf is the raw close of e in run n ending the window its raw
// open of run open began, as the diff writes it.
func rawCloseOf(e avail.Entity, n, open int) flip {
	f := rawFlip(e, avail.KindClose, n)
	f.OpenRunID = runID(open)
	return f
}

func TestStage_ProvisionalFlapIsRetractedOnceAndConfirmIsNot(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			p := startPipeline(t, b.Client(t), testRunner())
			e := slot("v1", "2025-07-04", "19:00", 2)
			p.webhookWatcher("prov", func(w *Watcher) { w.Slot, w.Provisional = e.Key, true })
			p.webhookWatcher("plain", func(w *Watcher) { w.Slot = e.Key })
			p.webhookWatcher("provpaused", func(w *Watcher) { w.Slot, w.Provisional, w.Paused = e.Key, true, true })

			// Flap: seen open in run 1, closed again in run 2 before it was
			// confirmed: a provisional notice, then its retraction.
			p.publish(rawFlip(e, avail.KindOpen, 1), rawCloseOf(e, 2, 1))
			p.settled(2)
			testenv.WaitFor(t, waitTimeout, func() bool { return len(p.recv.events("prov")) == 2 }, "provisional and retraction")
			// Replayed: nothing new.
			p.publish(rawFlip(e, avail.KindOpen, 1), rawCloseOf(e, 2, 1))
			p.settled(4)

			// Confirm: seen open in run 3, confirmed in run 4, closed in
			// runs 6 and 7: the open follows the provisional notice, and no
			// retraction, even when the raw open is replayed after the
			// confirmation.
			p.publish(rawFlip(e, avail.KindOpen, 3), stableFlip(e, avail.KindOpen, 4, true), rawFlip(e, avail.KindOpen, 3),
				rawCloseOf(e, 6, 3), stableFlip(e, avail.KindClose, 7, true))
			p.settled(9)
			testenv.WaitFor(t, waitTimeout, func() bool { return len(p.recv.events("prov")) == 4 }, "provisional and open")

			provID := avail.EventID(runID(1), e.Key, avail.KindOpen, false)
			want := []struct {
				event, eventID, retracts string
			}{
				{EventAvailabilityProvisional, provID, ""},
				{EventAvailabilityRetracted, avail.EventID(runID(2), e.Key, avail.KindClose, false), provID},
				{EventAvailabilityProvisional, avail.EventID(runID(3), e.Key, avail.KindOpen, false), ""},
				{EventAvailabilityOpen, avail.EventID(runID(4), e.Key, avail.KindOpen, true), ""},
			}
			evs := p.recv.events("prov")
			for i, w := range want {
				if ev := evs[i]; ev.Event != w.event || ev.EventID != w.eventID || ev.RetractsEventID != w.retracts {
					t.Errorf("prov notice %d = %s %s retracts %q; want %s %s retracts %q", i, ev.Event, ev.EventID, ev.RetractsEventID,
						w.event, w.eventID, w.retracts)
				}
			}
			if ev := evs[1]; ev.SessionID != avail.SessionID(e.Key, runID(1)) || ev.Text == "" {
				t.Errorf("retraction %+v, want the flapping window's session and a text", ev)
			}
			if evs := p.recv.events("plain"); len(evs) != 1 || evs[0].Event != EventAvailabilityOpen {
				t.Errorf("plain watcher got %+v, want only the confirmed open", evs)
			}
			if hits, _ := p.recv.counts("provpaused"); hits != 0 {
				t.Errorf("paused watcher told %d times", hits)
			}
			if n := p.notifications(notifier.OutcomeSent); n != 5 {
				t.Errorf("%d notifications sent, want 5", n)
			}
			if dls := p.deadLetters(); len(dls) != 0 {
				t.Errorf("dead letters: %+v", dls)
			}
		})
	}
}

// A provisional notice that the receiver refused for good is not
// retracted: the watcher never heard it.
func TestStage_ProvisionalRefusedIsNotRetracted(t *testing.T) {
	p := startPipeline(t, mini(t), testRunner())
	e := slot("v1", "2025-07-04", "19:00", 2)
	p.webhookWatcher("prov", func(w *Watcher) { w.Slot, w.Provisional = e.Key, true })
	p.recv.setStatus(func(_ string, hit int) int {
		if hit == 1 {
			return 410
		}
		return 200
	})
	p.publish(rawFlip(e, avail.KindOpen, 1))
	p.settled(1)
	p.publish(rawCloseOf(e, 2, 1))
	p.settled(2)
	if hits, accepted := p.recv.counts("prov"); hits != 1 || accepted != 0 {
		t.Errorf("receiver hit %d times, accepted %d; want the refused provisional notice only", hits, accepted)
	}
}
