package comic

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/dropstream/dropstream/internal/testenv"
)

// TestSales_concurrentBuyersExactlyOneWins: 12 buyers of one comic at
// once; one gets it, the 11 others are charged and refunded.
func TestSales_concurrentBuyersExactlyOneWins(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := context.Background()
			rdb := be.Client(t)
			pay := newTestPayments()
			svc := newService(t, rdb, nil, pay, StoreConfig{})
			c := comicN("Action Comics", 1, "DC", true)
			if _, _, err := svc.Inventory.Add(ctx, c); err != nil {
				t.Fatal(err)
			}
			const buyers = 12
			var wg sync.WaitGroup
			errs := make([]error, buyers)
			receipts := make([]Receipt, buyers)
			start := make(chan struct{})
			for i := range buyers {
				wg.Go(func() {
					<-start
					email := fmt.Sprintf("buyer%d@example.com", i)
					receipts[i], errs[i] = svc.Sales.Purchase(ctx, email, c.ID(), "card", "", "")
				})
			}
			close(start)
			wg.Wait()
			won, lost := 0, 0
			var winner Receipt
			for i, err := range errs {
				switch {
				case err == nil:
					won++
					winner = receipts[i]
				case errors.Is(err, ErrSoldOut):
					lost++
				default:
					t.Errorf("buyer %d: %v", i, err)
				}
			}
			if won != 1 || lost != buyers-1 {
				t.Fatalf("%d won, %d sold out; want 1 and %d", won, lost, buyers-1)
			}
			// Every charged loser is refunded; the winner is not.
			for txn := range pay.charged {
				if _, refunded := pay.refunded[txn]; refunded == (txn == winner.TxnID) {
					t.Errorf("txn %s: refunded %v", txn, refunded)
				}
			}
			if len(pay.refunded) != len(pay.charged)-1 {
				t.Errorf("%d charged, %d refunded; want all but the winner refunded", len(pay.charged), len(pay.refunded))
			}
			if _, err := svc.Inventory.Get(ctx, c.ID()); !errors.Is(err, ErrNotFound) {
				t.Errorf("comic still in inventory: %v", err)
			}
			sales, err := svc.Sales.Sales(ctx, c.ID())
			if err != nil || len(sales) != 1 || sales[0].Email != winner.Email || sales[0].PriceCents != c.PriceCents || sales[0].Gen != winner.Gen || winner.Gen < 1 {
				t.Errorf("sales = %+v, %v; want the winner's at the comic's price, of its listing %d", sales, err, winner.Gen)
			}
			// The winner retrying the same transaction buys nothing more.
			again, err := svc.Sales.Purchase(ctx, winner.Email, c.ID(), "card", winner.TxnID, "")
			if err != nil || !again.Repeated {
				t.Errorf("retried purchase = %+v, %v; want the repeated receipt", again, err)
			}
		})
	}
}

// TestSales_refundPathForgetsTheNotification: a subscriber notified of a
// comic loses it to another buyer, is refunded, and is notified again when
// the comic comes back; the winner, notified already, is not.
func TestSales_refundPathForgetsTheNotification(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := context.Background()
			rdb := be.Client(t)
			rcv := newReceiver(t)
			pay := newTestPayments()
			svc := newService(t, rdb, rcv, pay, StoreConfig{})
			mustSubscribe(t, svc.Subscriptions, "late@example.com", `{"series":"Watchmen"}`)
			mustSubscribe(t, svc.Subscriptions, "fast@example.com", `{"publisher":"DC"}`)
			run(t, rdb, svc.Stages()...)
			c := comicN("Watchmen", 1, "DC", true)
			if _, _, err := svc.Inventory.Add(ctx, c); err != nil {
				t.Fatal(err)
			}
			waitDone(t, svc, c.ID())
			if rcv.count() != 2 {
				t.Fatalf("%d notifications, want 2", rcv.count())
			}
			// late is charged, but fast buys the comic meanwhile; both hold
			// it, by the tokens of their notifications.
			toks := rcv.tokens(c.ID())
			pay.onCharge = func(txn string) {
				if txn == "txn-late" {
					if _, err := svc.Sales.Purchase(ctx, "fast@example.com", c.ID(), "card", "txn-fast", toks["fast@example.com"]); err != nil {
						t.Errorf("fast purchase: %v", err)
					}
				}
			}
			_, err := svc.Sales.Purchase(ctx, "late@example.com", c.ID(), "card", "txn-late", toks["late@example.com"])
			if !errors.Is(err, ErrSoldOut) {
				t.Fatalf("late purchase = %v, want ErrSoldOut", err)
			}
			if pay.charged["txn-late"] != c.PriceCents || pay.refunded["txn-late"] != c.PriceCents || len(pay.refunded) != 1 {
				t.Errorf("charged %v, refunded %v: want late charged and refunded the price, fast not refunded", pay.charged, pay.refunded)
			}
			hist, _ := svc.Delivery.History(ctx, c.ID())
			if _, ok := hist["late@example.com"]; ok || len(hist) != 1 {
				t.Fatalf("history %v: want only fast@example.com", hist)
			}
			// The comic comes back (the buyer returned it): late is told
			// again, fast is not.
			l, created, err := svc.Inventory.Add(ctx, c)
			if err != nil || !created || l.Gen != 2 {
				t.Fatalf("relist = %+v, %v, %v; want generation 2", l, created, err)
			}
			waitDone(t, svc, c.ID())
			testenv.WaitFor(t, waitTimeout, func() bool { return rcv.count() >= 3 }, "renotification")
			got := rcv.received()
			if rcv.count() != 3 || got[[2]string{c.ID(), "late@example.com"}] != 2 || got[[2]string{c.ID(), "fast@example.com"}] != 1 {
				t.Errorf("received %v, want late twice and fast once", got)
			}
		})
	}
}

// TestSales_refusedPaymentSellsNothing: a refused charge leaves the comic
// in inventory.
func TestSales_refusedPaymentSellsNothing(t *testing.T) {
	ctx := context.Background()
	rdb := backends()[0].Client(t)
	svc := newService(t, rdb, nil, newTestPayments(), StoreConfig{})
	c := comicN("Spawn", 1, "Image", true)
	if _, _, err := svc.Inventory.Add(ctx, c); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Sales.Purchase(ctx, "a@example.com", c.ID(), "bad", "txn-1", ""); !errors.Is(err, ErrPayment) {
		t.Fatalf("Purchase = %v, want ErrPayment", err)
	}
	if _, err := svc.Inventory.Get(ctx, c.ID()); err != nil {
		t.Errorf("comic left inventory after a refused payment: %v", err)
	}
}

// TestSales_crashBetweenChargeAndSaleConverges: the buyer is charged and
// the process dies before the sale. Whether the comic is still there or
// another buyer took it meanwhile, and whether the client retries or
// Recover finds the purchase in doubt, the purchase ends sold, or charged
// and refunded, each exactly once.
func TestSales_crashBetweenChargeAndSaleConverges(t *testing.T) {
	tests := []struct {
		name      string
		takenBy   string // another buyer who takes the comic after the crash
		byRecover bool   // Recover settles it; otherwise the client retries
	}{
		{"comic still there, recovered", "", true},
		{"comic still there, retried", "", false},
		{"comic taken meanwhile, recovered", "other@example.com", true},
		{"comic taken meanwhile, retried", "other@example.com", false},
	}
	for _, be := range backends() {
		for _, tt := range tests {
			t.Run(be.Name+"/"+tt.name, func(t *testing.T) {
				ctx := context.Background()
				rdb := be.Client(t)
				pay := newTestPayments()
				svc := newService(t, rdb, nil, pay, StoreConfig{})
				c := comicN("Sandman", 8, "Vertigo", true)
				if _, _, err := svc.Inventory.Add(ctx, c); err != nil {
					t.Fatal(err)
				}
				pay.crashAfterCharge["txn-crash"] = true
				if _, err := svc.Sales.Purchase(ctx, "crash@example.com", c.ID(), "card", "txn-crash", ""); !errors.Is(err, errCrash) {
					t.Fatalf("crashed purchase = %v, want the charge's failure", err)
				}
				if _, err := svc.Inventory.Get(ctx, c.ID()); err != nil {
					t.Fatalf("comic left inventory before the sale: %v", err)
				}
				if tt.takenBy != "" {
					if _, err := svc.Sales.Purchase(ctx, tt.takenBy, c.ID(), "card", "txn-other", ""); err != nil {
						t.Fatalf("other purchase: %v", err)
					}
				}
				var err error
				if tt.byRecover {
					var n int
					n, err = svc.Sales.Recover(ctx, 0)
					if n != 1 || err != nil {
						t.Fatalf("Recover = %d, %v; want 1 purchase settled", n, err)
					}
				} else {
					_, err = svc.Sales.Purchase(ctx, "crash@example.com", c.ID(), "card", "txn-crash", "")
				}
				wantBuyer := "crash@example.com"
				if tt.takenBy != "" {
					wantBuyer = tt.takenBy
					if !tt.byRecover && !errors.Is(err, ErrSoldOut) {
						t.Errorf("retry = %v, want ErrSoldOut", err)
					}
					if pay.refunds["txn-crash"] != 1 || pay.refunded["txn-crash"] != c.PriceCents {
						t.Errorf("refunds %v of %v; want txn-crash refunded its price once", pay.refunds, pay.refunded)
					}
				} else if err != nil || len(pay.refunds) != 0 {
					t.Errorf("settled with %v, refunds %v; want sold without refund", err, pay.refunds)
				}
				if pay.charges["txn-crash"] != 1 {
					t.Errorf("txn-crash charged %d times, want once", pay.charges["txn-crash"])
				}
				sales, err := svc.Sales.Sales(ctx, c.ID())
				if err != nil || len(sales) != 1 || sales[0].Email != wantBuyer {
					t.Errorf("sales = %+v, %v; want one sale to %s", sales, err, wantBuyer)
				}
				if _, err := svc.Inventory.Get(ctx, c.ID()); !errors.Is(err, ErrNotFound) {
					t.Errorf("comic still in inventory: %v", err)
				}
				// Settled: nothing is left in doubt, and asking again
				// changes nothing.
				if n, err := svc.Sales.Recover(ctx, 0); n != 0 || err != nil {
					t.Errorf("second Recover = %d, %v; want nothing to settle", n, err)
				}
				again, err := svc.Sales.Purchase(ctx, "crash@example.com", c.ID(), "card", "txn-crash", "")
				if tt.takenBy == "" && (err != nil || !again.Repeated) {
					t.Errorf("repeated purchase = %+v, %v; want the repeated receipt", again, err)
				}
				if tt.takenBy != "" && !errors.Is(err, ErrSoldOut) {
					t.Errorf("repeated purchase = %v, want ErrSoldOut", err)
				}
				if pay.charges["txn-crash"] != 1 || pay.refunds["txn-crash"] > 1 {
					t.Errorf("after repeats: %d charges, %d refunds of txn-crash", pay.charges["txn-crash"], pay.refunds["txn-crash"])
				}
			})
		}
	}
}

// TestSales_retryAfterTheSaleRepeatsItsReceipt: once a comic is sold and
// out of inventory, the buyer retrying the transaction, by its id or by
// the id derived from the listing, gets the same receipt marked Repeated
// and is not charged again; another buyer finds it sold out.
func TestSales_retryAfterTheSaleRepeatsItsReceipt(t *testing.T) {
	for _, be := range backends() {
		for _, txn := range []string{"", "txn-mine"} {
			t.Run(fmt.Sprintf("%s/txn=%q", be.Name, txn), func(t *testing.T) {
				ctx := context.Background()
				pay := newTestPayments()
				svc := newService(t, be.Client(t), nil, pay, StoreConfig{})
				c := comicN("Watchmen", 1, "DC", true)
				l, _, err := svc.Inventory.Add(ctx, c)
				if err != nil {
					t.Fatal(err)
				}
				first, err := svc.Sales.Purchase(ctx, "mine@example.com", c.ID(), "card", txn, "")
				if err != nil || first.Repeated || first.Gen != l.Gen {
					t.Fatalf("purchase = %+v, %v; want a fresh receipt of listing %d", first, err, l.Gen)
				}
				again, err := svc.Sales.Purchase(ctx, "mine@example.com", c.ID(), "card", txn, "")
				if err != nil || !again.Repeated || again.TxnID != first.TxnID || again.Gen != first.Gen || again.PriceCents != c.PriceCents {
					t.Errorf("retry = %+v, %v; want %+v repeated", again, err, first)
				}
				if pay.charges[first.TxnID] != 1 || len(pay.charges) != 1 {
					t.Errorf("charges %v, want %s charged once", pay.charges, first.TxnID)
				}
				if _, err := svc.Sales.Purchase(ctx, "other@example.com", c.ID(), "card", "", ""); !errors.Is(err, ErrSoldOut) {
					t.Errorf("another buyer = %v, want ErrSoldOut", err)
				}
			})
		}
	}
}
