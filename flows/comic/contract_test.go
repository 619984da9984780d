package comic_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/flows/checkout"
	"github.com/dropstream/dropstream/flows/comic"
	"github.com/dropstream/dropstream/internal/egress"
	"github.com/dropstream/dropstream/internal/egress/egresstest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/stream"
)

// buildBefore builds the flows the app builds before the comic flow over
// deps, and returns deps finding them.
func buildBefore(t *testing.T, deps flow.Deps) (flow.Deps, *checkout.Flow, *notifier.Flow) {
	t.Helper()
	co, err := checkout.New(t.Context(), deps)
	if err != nil {
		t.Fatal(err)
	}
	nf, err := notifier.New(t.Context(), deps)
	if err != nil {
		t.Fatal(err)
	}
	deps.Flows = lookup(co, nf)
	return deps, co, nf
}

// lookup finds the flows given, by their names, as the app's lookup finds
// the flows built before the caller.
func lookup(flows ...flow.Flow) flow.Lookup {
	return func(name string) (flow.Flow, bool) {
		for _, f := range flows {
			switch f := f.(type) {
			case *checkout.Flow:
				if name == checkout.Name {
					return f, true
				}
			case *notifier.Flow:
				if name == notifier.Name {
					return f, true
				}
			}
		}
		return nil, false
	}
}

// TestNew_purchasesUseTheConfiguredCheckoutFlow builds the checkout and
// comic flows as the app does, with a checkout timeout of 300ms, and runs
// only what the flows declare as waiters: no saga stage answers. The comic
// flow charges through the checkout flow built before it (the same
// instance, no waiter of its own), so a purchase is given up and refused
// after the configured timeout, not after the default 30s.
func TestNew_purchasesUseTheConfiguredCheckoutFlow(t *testing.T) {
	ctx := context.Background()
	rdb := testenv.Dial(t, testenv.RedisURL(t))
	values, err := flow.ReadVars(slices.Concat(checkout.Vars, comic.Vars), func(name string) (string, bool) {
		return map[string]string{checkout.VarTimeout: "300ms"}[name], true
	})
	if err != nil {
		t.Fatal(err)
	}
	tel := stream.Telemetry{Logger: slog.New(slog.DiscardHandler)}
	deps := flow.Deps{Redis: rdb, Publisher: stream.NewPublisher(rdb, tel), Telemetry: tel,
		Settings: flow.Settings{Partitions: 2}.WithVars(values)}
	deps, co, _ := buildBefore(t, deps)
	f, err := comic.New(ctx, deps)
	if err != nil {
		t.Fatal(err)
	}
	if f.Checkout() != co {
		t.Fatalf("the comic flow charges through %p, want the checkout flow %p", f.Checkout(), co)
	}
	if w := f.Describe().Waiters; len(w) != 0 {
		t.Errorf("comic waiters %v, want none: the checkout flow's waiter serves its calls", w)
	}

	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for _, w := range co.Describe().Waiters {
		wg.Go(func() { _ = w.Run(rctx) })
	}
	select {
	case <-co.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("checkout waiter not ready")
	}
	c := comic.Comic{Grade: 9.8, Issue: "1", PriceCents: 5000, Printing: 1, Publisher: "Image", Series: "Saga", Title: "Chapter One", Year: 2012}
	if _, _, err := f.Inventory.Add(ctx, c); err != nil {
		t.Fatal(err)
	}
	user, err := co.Store().CreateUser(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := co.Store().AddFunds(ctx, user, 20000); err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
	defer pcancel()
	start := time.Now()
	_, err = f.Sales.Purchase(pctx, "b@example.com", c.ID(), user, "txn-unanswered")
	if !errors.Is(err, comic.ErrPayment) || time.Since(start) > 5*time.Second {
		t.Fatalf("purchase without saga stages = %v after %s; want ErrPayment once the checkout's 300ms timeout gives the attempt up",
			err, time.Since(start).Round(time.Millisecond))
	}
	if credit, err := co.Store().FindUser(ctx, user); err != nil || credit != 20000 {
		t.Errorf("credit %d, %v; want 20000 (nothing charged)", credit, err)
	}
	if _, err := f.Inventory.Get(ctx, c.ID()); err != nil {
		t.Errorf("the comic left inventory: %v", err)
	}
}

// TestNew_needsTheCheckoutFlow: the comic flow is built after the checkout
// flow, and refuses to be built without it.
func TestNew_needsTheCheckoutFlow(t *testing.T) {
	rdb := testenv.Dial(t, testenv.RedisURL(t))
	_, err := comic.New(context.Background(), flow.Deps{Redis: rdb, Settings: flow.Settings{Partitions: 2},
		Flows: func(string) (flow.Flow, bool) { return nil, false }})
	if !errors.Is(err, flow.ErrNotBuilt) {
		t.Errorf("New without the checkout flow = %v, want ErrNotBuilt", err)
	}
}

// TestNew_needsTheNotifierFlow: the comic flow relays its notifications to
// the notifier flow, built before it, and refuses to be built without it,
// naming it.
func TestNew_needsTheNotifierFlow(t *testing.T) {
	rdb := testenv.Dial(t, testenv.RedisURL(t))
	deps := flow.Deps{Redis: rdb, Publisher: stream.NewPublisher(rdb, stream.Telemetry{}), Settings: flow.Settings{Partitions: 2}}
	co, err := checkout.New(t.Context(), deps)
	if err != nil {
		t.Fatal(err)
	}
	deps.Flows = lookup(co)
	_, err = comic.New(t.Context(), deps)
	if !errors.Is(err, flow.ErrNotBuilt) || !strings.Contains(err.Error(), `"notifier"`) {
		t.Errorf("New without the notifier flow = %v, want ErrNotBuilt naming the notifier", err)
	}
}

// The flow's own notify URL (DROPSTREAM_COMIC_NOTIFY_URL) on a denied
// address makes the start fail, naming the allow list; allowed, it starts.
func TestNew_notifyURLOnADeniedAddressNeedsTheAllowList(t *testing.T) {
	rdb := testenv.Dial(t, testenv.RedisURL(t))
	values, err := flow.ReadVars(slices.Concat(checkout.Vars, comic.Vars), func(name string) (string, bool) {
		return map[string]string{comic.VarNotifyURL: "http://127.0.0.1:9000/notify", comic.VarNotifySecret: "0123456789abcdef0123"}[name], true
	})
	if err != nil {
		t.Fatal(err)
	}
	deps := flow.Deps{Redis: rdb, Publisher: stream.NewPublisher(rdb, stream.Telemetry{}), Settings: flow.Settings{Partitions: 2}.WithVars(values)}
	deps, _, _ = buildBefore(t, deps)
	if _, err := comic.New(t.Context(), deps); !errors.Is(err, egress.ErrDenied) || !strings.Contains(err.Error(), "DROPSTREAM_EGRESS_ALLOW") {
		t.Errorf("New with a loopback notify URL = %v, want ErrDenied naming DROPSTREAM_EGRESS_ALLOW", err)
	}
	deps.Settings.Egress = egresstest.Allow(t, "127.0.0.1:9000")
	if _, err := comic.New(t.Context(), deps); err != nil {
		t.Errorf("New with the notify URL allowed: %v", err)
	}
}
