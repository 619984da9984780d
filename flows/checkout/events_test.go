package checkout_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/internal/tenancy"
	"github.com/dropstream/dropstream/internal/testenv"
)

func TestEvents_aCompensatedCheckoutWithItsSteps(t *testing.T) {
	e := newEnv(t, miniredisURL(t), envOptions{timeout: 20 * time.Second, tracer: sdktrace.NewTracerProvider()})
	order, user, _ := compensatedCheckout(t, e)

	events := e.svc.Describe().Events
	var ev flow.Event
	testenv.WaitFor(t, 10*time.Second, func() bool {
		evs, err := events(context.Background(), tenancy.View{All: true}, 10)
		if err != nil || len(evs) == 0 {
			return false
		}
		ev = evs[0]
		return len(ev.Steps) == 5 // three parts, two of them undone
	}, "the checkout's event with its five steps")
	if ev.Kind != "checkout" || ev.Subject != "order "+order+" by user "+user || !strings.HasPrefix(ev.Summary, "failed") ||
		ev.Cause[0] != (flow.Ref{Kind: "order", ID: order}) || ev.TraceID == "" {
		t.Errorf("event %+v: want the failed checkout of %s with its order and trace", ev, order)
	}
	undone, failed := 0, 0
	for _, s := range ev.Steps {
		if strings.HasPrefix(s.Name, "undo ") {
			undone++
		}
		if !s.OK {
			failed++
		}
	}
	if undone != 2 || failed != 1 {
		t.Errorf("steps %+v: want two undone and one failed", ev.Steps)
	}
	// The order is the open tenant's (the contract's routes on an open
	// API): its checkout is that tenant's event, and no other tenant's.
	for _, tc := range []struct {
		name  string
		v     tenancy.View
		shown bool
	}{
		{"its tenant", tenancy.View{Tenant: tenancy.Open}, true},
		{"an admin view", tenancy.View{Tenant: "ops", All: true}, true},
		{"another tenant", tenancy.View{Tenant: "shop"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := events(context.Background(), tc.v, 10)
			if err != nil {
				t.Fatal(err)
			}
			shown := slices.ContainsFunc(evs, func(e flow.Event) bool { return e.Cause[0].ID == order })
			if shown != tc.shown {
				t.Errorf("%+v sees the checkout of %s: %v, want %v (events %+v)", tc.v, order, shown, tc.shown, evs)
			}
		})
	}
}

// compensatedCheckout checks out an order of two items in two partitions,
// the second out of stock: the attempt fails and the other parts are
// undone. It returns the order, its user and the item out of stock.
func compensatedCheckout(t *testing.T, e *env) (order, user, missing string) {
	t.Helper()
	a, c := itemsInTwoPartitions(t, e, 1)
	e.must(t, 200, "POST", "/stock/add/"+a+"/1")
	user = str(t, e.must(t, 200, "POST", "/payment/create_user"), "user_id")
	e.must(t, 200, "POST", "/payment/add_funds/"+user+"/10")
	order = str(t, e.must(t, 200, "POST", "/orders/create/"+user), "order_id")
	e.must(t, 200, "POST", "/orders/addItem/"+order+"/"+a)
	e.must(t, 200, "POST", "/orders/addItem/"+order+"/"+c) // c has no stock: compensation
	e.must(t, 400, "POST", "/orders/checkout/"+order)
	return order, user, c
}
