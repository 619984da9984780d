package comic

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier/history"
	"github.com/dropstream/dropstream/stream"
)

// heldService is newService with waves of size and clock on every part.
func heldService(t *testing.T, rdb redis.UniversalClient, rcv *receiver, p Payments, size int, clk *testenv.Clock) *Flow {
	t.Helper()
	svc := newService(t, rdb, rcv, p, StoreConfig{})
	svc.Holds.cfg.WaveSize = size
	svc.Holds.now, svc.Delivery.now, svc.Inventory.now = clk.Now, clk.Now, clk.Now
	if svc.Sales != nil {
		svc.Sales.now = clk.Now
	}
	return svc
}

// tokens returns email → hold token of what rcv received about comic id.
func (r *receiver) tokens(id string) map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]string{}
	for _, n := range r.got {
		if n.ComicID == id {
			out[n.Email] = n.HoldToken
		}
	}
	return out
}

// lotteryOrder returns the subscriptions in the order their waves tell them.
func lotteryOrder(id string, gen int64, subs []Subscription) []Subscription {
	out := slices.Clone(subs)
	slices.SortFunc(out, func(a, b Subscription) int {
		return cmp.Or(cmp.Compare(lotteryScore(id, gen, a.ID), lotteryScore(id, gen, b.ID)), cmp.Compare(a.ID, b.ID))
	})
	return out
}

func subscribeFans(t *testing.T, svc *Flow, n int, body string) []Subscription {
	subs := make([]Subscription, n)
	for i := range subs {
		subs[i] = mustSubscribe(t, svc.Subscriptions, fmt.Sprintf("fan%d@example.com", i), body)
	}
	return subs
}

// TestHold_concurrentBuyersInsideAndOutside: the first wave's 3 holders
// and 4 others (the next wave's members with their would-be tokens, a
// buyer without a token, a forged token) buy at once: one holder wins, the
// other holders are refunded, and every outsider is refused with the
// hold's end and never charged.
func TestHold_concurrentBuyersInsideAndOutside(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := context.Background()
			rdb := be.Client(t)
			rcv, pay, clk := newReceiver(t), newTestPayments(), testenv.NewClock(time.Now())
			svc := heldService(t, rdb, rcv, pay, 3, clk)
			subs := subscribeFans(t, svc, 5, `{"series":"Saga"}`)
			run(t, rdb, svc.Stages()...)
			c := comicN("Saga", 1, "Image", true)
			if _, _, err := svc.Inventory.AddHeld(ctx, c, 5*time.Minute); err != nil {
				t.Fatal(err)
			}
			waitDone(t, svc, c.ID())
			order := lotteryOrder(c.ID(), 1, subs)
			toks := rcv.tokens(c.ID())
			if len(toks) != 3 || rcv.count() != 3 {
				t.Fatalf("first wave told %v, want 3 subscribers", toks)
			}
			salt, _ := svc.Holds.state(ctx, c.ID())
			type buyer struct{ email, token string }
			var inside, outside []buyer
			for i, s := range order {
				if i < 3 {
					if toks[s.Email] == "" {
						t.Fatalf("holder %s (lottery place %d) got no token: %v", s.Email, i, toks)
					}
					inside = append(inside, buyer{s.Email, toks[s.Email]})
				} else {
					outside = append(outside, buyer{s.Email, HoldToken(salt.salt, s.ID)})
				}
			}
			outside = append(outside, buyer{"walkin@example.com", ""}, buyer{"forger@example.com", order[0].ID + ".00000000000000000000000000000000"})
			// The holders' charges wait for the outsiders' answers, so each
			// outsider finds the comic still for sale.
			all := append(slices.Clone(inside), outside...)
			errs := make([]error, len(all))
			var wg, out sync.WaitGroup
			out.Add(len(outside))
			outsidersDone := make(chan struct{})
			pay.onCharge = func(string) { <-outsidersDone }
			for i, b := range all {
				wg.Go(func() {
					_, errs[i] = svc.Sales.Purchase(ctx, b.email, c.ID(), "card", "txn-"+fmt.Sprint(i), b.token)
					if i >= len(inside) {
						out.Done()
					}
				})
			}
			out.Wait()
			close(outsidersDone)
			wg.Wait()
			won := 0
			for i, err := range errs[:len(inside)] {
				switch {
				case err == nil:
					won++
				case !errors.Is(err, ErrSoldOut):
					t.Errorf("holder %d: %v, want a sale or sold out", i, err)
				}
			}
			if won != 1 {
				t.Errorf("%d holders won, want 1", won)
			}
			wantEnd := clk.Now().Add(5 * time.Minute).UTC().Truncate(time.Millisecond)
			for i, err := range errs[len(inside):] {
				var he *HoldError
				if !errors.As(err, &he) || !he.EndsAt.Equal(wantEnd) {
					t.Errorf("outsider %s: %v, want a hold error ending at %s", outside[i].email, err, wantEnd)
				}
				if _, charged := pay.charged["txn-"+fmt.Sprint(len(inside)+i)]; charged {
					t.Errorf("outsider %s was charged", outside[i].email)
				}
			}
		})
	}
}

// TestHold_expiresAndNextWaveIsTold: nobody of the first wave buys; until
// its hold ends no wave is told, then the next 2 in lottery order are told
// once and hold the comic: the first wave can no longer buy, the second
// can; once sold, no further wave is told. The timeline shows both waves.
func TestHold_expiresAndNextWaveIsTold(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := context.Background()
			rdb := be.Client(t)
			rcv, clk := newReceiver(t), testenv.NewClock(time.Now())
			svc := heldService(t, rdb, rcv, newTestPayments(), 2, clk)
			subs := subscribeFans(t, svc, 5, `{"series":"Saga"}`)
			run(t, rdb, svc.Stages()...)
			c := comicN("Saga", 2, "Image", true)
			if _, _, err := svc.Inventory.Add(ctx, c); err != nil {
				t.Fatal(err)
			}
			waitDone(t, svc, c.ID())
			order := lotteryOrder(c.ID(), 1, subs)
			clk.Add(svc.Holds.cfg.Window - time.Millisecond)
			if n, err := svc.Holds.Advance(ctx); err != nil || n != 0 {
				t.Fatalf("Advance within the hold = %d, %v; want nothing told", n, err)
			}
			clk.Add(time.Millisecond)
			if n, err := svc.Holds.Advance(ctx); err != nil || n != 1 {
				t.Fatalf("Advance at the hold's end = %d, %v; want the next wave", n, err)
			}
			testenv.WaitFor(t, waitTimeout, func() bool { return rcv.count() == 4 }, "second wave delivered")
			toks := rcv.tokens(c.ID())
			for i, s := range order {
				if _, told := toks[s.Email]; told != (i < 4) {
					t.Errorf("lottery place %d (%s) told %v after two waves", i, s.Email, told)
				}
			}
			if _, err := svc.Sales.Purchase(ctx, order[0].Email, c.ID(), "card", "", toks[order[0].Email]); !errors.Is(err, ErrHoldActive) {
				t.Errorf("first-wave holder during the second hold: %v, want hold active", err)
			}
			// A delivery is recorded in the history after its webhook answers.
			var tl HoldTimeline
			var err error
			testenv.WaitFor(t, waitTimeout, func() bool {
				tl, err = svc.Timeline(ctx, c.ID())
				return err == nil && len(tl.Waves) == 2 && len(tl.Waves[0].Notifications) == 2 && len(tl.Waves[1].Notifications) == 2
			}, "both waves' notifications in the timeline")
			if len(tl.Waves) != 2 || tl.Hold == nil || tl.Hold.Wave != 2 || len(tl.Waves[0].Notifications) != 2 ||
				len(tl.Waves[1].Notifications) != 2 || tl.Waves[1].Notifications[0].At.Before(tl.Waves[1].ToldAt) {
				t.Fatalf("timeline %+v, %v; want 2 waves of 2 notifications, the second holding", tl, err)
			}
			if _, err := svc.Sales.Purchase(ctx, order[3].Email, c.ID(), "card", "", toks[order[3].Email]); err != nil {
				t.Fatalf("second-wave holder: %v", err)
			}
			clk.Add(time.Hour)
			if n, err := svc.Holds.Advance(ctx); err != nil || n != 0 {
				t.Errorf("Advance after the sale = %d, %v; want nothing told", n, err)
			}
			if tl, err := svc.Timeline(ctx, c.ID()); err != nil || tl.Hold != nil || len(tl.Waves) != 2 || len(tl.Sales) != 1 {
				t.Errorf("timeline after the sale %+v, %v; want 2 waves, no hold, the sale", tl, err)
			}
			if rcv.count() != 4 {
				t.Errorf("%d notifications, want the 4 of two waves", rcv.count())
			}
		})
	}
}

// TestHold_crashBetweenWavesTellsEachWaveOnce: a waves service copy is
// stopped after the first wave; a fresh flow over the same Redis and the
// old copy then race over the due holds: each wave is told once, none is
// skipped, and peter, with two subscriptions, is notified once.
func TestHold_crashBetweenWavesTellsEachWaveOnce(t *testing.T) {
	for _, be := range testenv.WithCluster() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := context.Background()
			rdb := be.Client(t)
			rcv, clk := newReceiver(t), testenv.NewClock(time.Now())
			a := heldService(t, rdb, rcv, nil, 2, clk)
			subs := subscribeFans(t, a, 4, `{"series":"Saga"}`)
			subs = append(subs, mustSubscribe(t, a.Subscriptions, "fan0@example.com", `{"publisher":"Image"}`))
			run(t, rdb, a.Stages()...)
			actx, stopA := context.WithCancel(ctx)
			doneA := make(chan struct{})
			a.Holds.cfg.Poll = time.Millisecond
			waves := a.Describe().Services[0] // ServiceWaves
			go func() { _ = waves.Run(actx); close(doneA) }()
			c := comicN("Saga", 3, "Image", true)
			if _, _, err := a.Inventory.Add(ctx, c); err != nil {
				t.Fatal(err)
			}
			waitDone(t, a, c.ID())
			stopA()
			<-doneA
			b := heldService(t, rdb, rcv, nil, 2, clk)
			for wave := 2; wave <= 3; wave++ {
				clk.Add(a.Holds.cfg.Window)
				told := make([]int, 8)
				var wg sync.WaitGroup
				for i := range told {
					f := []*Flow{a, b}[i%2]
					wg.Go(func() { told[i], _ = f.Holds.Advance(ctx) })
				}
				wg.Wait()
				if n := told[0] + told[1] + told[2] + told[3] + told[4] + told[5] + told[6] + told[7]; n != 1 {
					t.Fatalf("wave %d told %d times, want once", wave, n)
				}
				waitDone(t, a, c.ID())
			}
			clk.Add(a.Holds.cfg.Window)
			if n, err := b.Holds.Advance(ctx); err != nil || n != 0 {
				t.Errorf("Advance past the last wave = %d, %v; want nothing", n, err)
			}
			got := handedOff(t, rdb, a.Topics().Notify)
			want := lotteryOrder(c.ID(), 1, subs)
			for i, s := range want {
				if i >= len(got) || got[i] != s.ID {
					t.Fatalf("told %v, want the 5 subscriptions in lottery order %v", got, want)
				}
			}
			if r := rcv.received(); len(r) != 4 || rcv.count() != 4 {
				t.Errorf("received %v (%d), want 4 emails once each", r, rcv.count())
			}
		})
	}
}

// TestHold_relayedHoldStartsAtTheNotifiersSend: a notification relayed to
// the notifier holds from the send its history records (delayed here by
// five minutes); a failed send or another wave's send moves nothing.
func TestHold_relayedHoldStartsAtTheNotifiersSend(t *testing.T) {
	ctx := context.Background()
	rdb := testenv.WithCluster()[2].Client(t)
	clk := testenv.NewClock(time.Now())
	svc := heldService(t, rdb, nil, nil, 2, clk)
	subscribeFans(t, svc, 1, `{"series":"Saga"}`)
	c := comicN("Saga", 4, "Image", true)
	l, _, err := svc.Inventory.Add(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Matcher.Process(ctx, Job{ComicID: c.ID(), Gen: l.Gen, AddedAtMs: clk.Now().UnixMilli(), Comic: c.Canonical()}); err != nil {
		t.Fatal(err)
	}
	sent := clk.Now().Add(5 * time.Minute)
	stage := svc.Holds.sentStage(stream.NewTopic("notify", "history", 1))
	for _, r := range []history.Record{
		{Flow: Name, Status: history.StatusSent, Window: c.ID() + ":1:1:ab", At: sent},
		{Flow: Name, Status: history.StatusFailed, Window: c.ID() + ":1:1:cd", At: sent.Add(time.Minute)},
		{Flow: Name, Status: history.StatusSent, Window: c.ID() + ":1:2:ef", At: sent.Add(time.Minute)},
	} {
		payload, _ := json.Marshal([]history.Record{r})
		if err := stage.Handler(ctx, &stream.Message{Type: history.TypeRecords, Payload: payload}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := svc.Holds.state(ctx, c.ID())
	if want := sent.Add(svc.Holds.cfg.Window).UnixMilli(); err != nil || st.ends != want {
		t.Errorf("hold ends at %d, %v; want %d, the send plus the window", st.ends, err, want)
	}
}
