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
	"github.com/dropstream/dropstream/internal/tenancy"
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
	user, err := co.Store().CreateUserOf(ctx, tenancy.Open)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := co.Store().AddFunds(ctx, user, 20000); err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
	defer pcancel()
	start := time.Now()
	_, err = f.Sales.Purchase(pctx, "b@example.com", c.ID(), user, "txn-unanswered", "")
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

// The flow's own notify URL (DROPSTREAM_COMIC_NOTIFY_URL) goes through
// the egress policy's normalization and check before it is stored: spaces
// around it are trimmed, credentials are refused, a denied address makes
// the start fail naming the allow list, and an allowed one starts with the
// normalized URL stored.
func TestNew_notifyURLIsNormalizedAndCheckedBeforeItIsStored(t *testing.T) {
	rdb := testenv.Dial(t, testenv.RedisURL(t))
	for _, tc := range []struct {
		name, url, allow string
		wantErr          error
		wantStored       string
	}{
		{name: "denied loopback", url: "http://127.0.0.1:9000/notify", wantErr: egress.ErrDenied},
		{name: "loopback allowed", url: "http://127.0.0.1:9000/notify", allow: "127.0.0.1:9000", wantStored: "http://127.0.0.1:9000/notify"},
		{name: "spaces trimmed", url: "  https://hooks.example.org/notify \t", wantStored: "https://hooks.example.org/notify"},
		{name: "spaces around a denied address", url: " http://127.0.0.1:9000/notify", wantErr: egress.ErrDenied},
		{name: "credentials", url: "https://user:secret@hooks.example.org/notify", wantErr: egress.ErrInvalidURL},
		{name: "user alone", url: "https://user@hooks.example.org/notify", wantErr: egress.ErrInvalidURL},
		{name: "unset", url: "", wantStored: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The settings as given, not as ReadVars trims them: New's own
			// check is under test.
			values := map[string]string{comic.VarNotifyURL: tc.url, comic.VarNotifySecret: "0123456789abcdef0123"}
			deps := flow.Deps{Redis: rdb, Publisher: stream.NewPublisher(rdb, stream.Telemetry{}), Settings: flow.Settings{Partitions: 2}.WithVars(values)}
			if tc.allow != "" {
				deps.Settings.Egress = egresstest.Allow(t, tc.allow)
			}
			deps, _, _ = buildBefore(t, deps)
			f, err := comic.New(t.Context(), deps)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), comic.VarNotifyURL) {
					t.Fatalf("New with notify URL %q = %v, want %v naming %s", tc.url, err, tc.wantErr, comic.VarNotifyURL)
				}
				if strings.Contains(err.Error(), "secret") {
					t.Errorf("the error shows the URL's credentials: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("New with notify URL %q: %v", tc.url, err)
			}
			if got := comic.NotifyURLOf(f); got != tc.wantStored {
				t.Errorf("stored notify URL %q, want %q", got, tc.wantStored)
			}
		})
	}
}
