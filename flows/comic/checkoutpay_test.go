package comic_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/dropstream/dropstream/flows/checkout"
	"github.com/dropstream/dropstream/flows/comic"
	"github.com/dropstream/dropstream/internal/tenancy"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// TestCheckoutPayments_purchasesThroughTheCheckoutSaga runs the checkout saga's
// stages and waiter on a real Redis and buys one comic with three
// concurrent buyers: exactly one is charged the price through the saga,
// the others end with their credit unchanged.
func TestCheckoutPayments_purchasesThroughTheCheckoutSaga(t *testing.T) {
	ctx := context.Background()
	rdb, err := stream.Dial(ctx, testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	tel := stream.Telemetry{Logger: slog.New(slog.DiscardHandler)}
	co, err := checkout.NewWith(rdb, stream.NewPublisher(rdb, tel), checkout.Config{Partitions: 2}, tel)
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() { _ = co.Run(rctx) })
	for _, s := range co.Stages() {
		s.Config.Block = 50 * time.Millisecond
		r, err := stream.NewRunner(rdb, s, tel)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { _ = r.Run(rctx) })
	}
	select {
	case <-co.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("checkout waiter not ready")
	}
	svc, err := comic.NewWith(rdb, comic.Config{Partitions: 2}, comic.NewCheckoutPayments(rdb, co), tel)
	if err != nil {
		t.Fatal(err)
	}
	c := comic.Comic{Grade: 9.8, Issue: "1", PriceCents: 5000, Printing: 1, Publisher: "Image", Series: "Saga", Title: "Chapter One", Year: 2012}
	if _, _, err := svc.Inventory.Add(ctx, c); err != nil {
		t.Fatal(err)
	}
	const credit = 20000
	users := make([]string, 3)
	for i := range users {
		if users[i], err = co.Store().CreateUserOf(ctx, tenancy.Open); err != nil {
			t.Fatal(err)
		}
		if _, err := co.Store().AddFunds(ctx, users[i], credit); err != nil {
			t.Fatal(err)
		}
	}
	errs := make([]error, len(users))
	var buyers sync.WaitGroup
	for i, u := range users {
		buyers.Go(func() {
			email := fmt.Sprintf("b%d@example.com", i)
			_, errs[i] = svc.Sales.Purchase(ctx, email, c.ID(), u, "", "")
		})
	}
	buyers.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won < 0:
			won = i
		case errors.Is(err, comic.ErrSoldOut):
		default:
			t.Errorf("buyer %d: %v", i, err)
		}
	}
	if won < 0 {
		t.Fatalf("nobody won: %v", errs)
	}
	for i, u := range users {
		got, err := co.Store().FindUser(ctx, u)
		want := int64(credit)
		if i == won {
			want -= c.PriceCents
		}
		if err != nil || got != want {
			t.Errorf("buyer %d credit %d, %v; want %d", i, got, err, want)
		}
	}
	// A buyer without enough credit is refused and nothing is sold.
	c2 := c
	c2.Issue, c2.PriceCents = "2", 50000
	if _, _, err := svc.Inventory.Add(ctx, c2); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Sales.Purchase(ctx, "poor@example.com", c2.ID(), users[0], "txn-poor", ""); !errors.Is(err, comic.ErrPayment) {
		t.Errorf("purchase over credit = %v, want ErrPayment", err)
	}
	if _, err := svc.Inventory.Get(ctx, c2.ID()); err != nil {
		t.Errorf("comic 2 left inventory: %v", err)
	}
	// With credit added, the same transaction is tried again and buys it.
	if _, err := co.Store().AddFunds(ctx, users[0], c2.PriceCents); err != nil {
		t.Fatal(err)
	}
	before, _ := co.Store().FindUser(ctx, users[0])
	if rec, err := svc.Sales.Purchase(ctx, "poor@example.com", c2.ID(), users[0], "txn-poor", ""); err != nil || rec.Repeated {
		t.Fatalf("purchase after adding credit = %+v, %v; want a fresh sale", rec, err)
	}
	if after, _ := co.Store().FindUser(ctx, users[0]); after != before-c2.PriceCents {
		t.Errorf("credit %d after the purchase, want %d", after, before-c2.PriceCents)
	}
	if _, err := svc.Inventory.Get(ctx, c2.ID()); !errors.Is(err, comic.ErrNotFound) {
		t.Errorf("comic 2 still in inventory after its sale: %v", err)
	}
	// A refund credits once, however often (and however concurrently)
	// it is asked for; an unknown user is an error.
	pay := comic.NewCheckoutPayments(rdb, co)
	before, _ = co.Store().FindUser(ctx, users[1])
	var refunds sync.WaitGroup
	for range 5 {
		refunds.Go(func() {
			if err := pay.Refund(ctx, "txn-refund", users[1], 700); err != nil {
				t.Errorf("refund: %v", err)
			}
		})
	}
	refunds.Wait()
	if after, _ := co.Store().FindUser(ctx, users[1]); after != before+700 {
		t.Errorf("credit %d after 5 refunds of one transaction, want %d", after, before+700)
	}
	if err := pay.Refund(ctx, "txn-nobody", "nobody", 700); !errors.Is(err, checkout.ErrNotFound) {
		t.Errorf("refund to an unknown user = %v, want checkout.ErrNotFound", err)
	}
}
