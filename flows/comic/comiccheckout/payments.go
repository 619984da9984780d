// Package comiccheckout charges comic purchases through the checkout saga
// (flows/checkout): it implements comic.Payments.
//
// A charge is a one-line checkout order: the buyer (the payment reference
// is a checkout user id) orders one unit of an item created for the
// transaction at the comic's price with a stock of one, and the saga runs
// its stock and payment steps, compensating both when either fails. The
// order of a transaction is remembered, so a retried charge checks the
// same order out again (the saga answers "already paid"). A refund adds
// the price back to the buyer's credit, once per transaction.
package comiccheckout

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/flows/checkout"
	"github.com/dropstream/dropstream/flows/comic"
)

// Keys of the adapter, in their own slot.
const (
	orderPrefix  = "ds:{comic-pay}:comic:pay:order:"  // string per txn: checkout order id
	refundPrefix = "ds:{comic-pay}:comic:pay:refund:" // string per txn: refunded
)

// keyTTL bounds how long a transaction's order and refund marks are kept.
const keyTTL = 30 * 24 * time.Hour

// Payments charges through a checkout.Service, whose stages and waiter
// must run (cmd/dropstream's checkout flow runs them).
type Payments struct {
	rdb redis.UniversalClient
	svc *checkout.Service
}

// New returns the adapter.
func New(rdb redis.UniversalClient, svc *checkout.Service) *Payments {
	return &Payments{rdb: rdb, svc: svc}
}

// ErrRefused wraps a charge the saga refused (not enough credit, unknown
// user); it wraps comic.ErrDeclined, so the comic flow knows nothing was
// charged. Other errors of Charge (the saga still running after its
// timeout, Redis errors) leave the outcome unknown.
var ErrRefused = fmt.Errorf("comiccheckout: charge refused: %w", comic.ErrDeclined)

// Charge checks out the transaction's order; see the package doc.
func (p *Payments) Charge(ctx context.Context, txnID, payment string, cents int64) error {
	order, err := p.order(ctx, txnID, payment, cents)
	if err != nil {
		return err
	}
	_, err = p.svc.Checkout(ctx, order)
	switch {
	case errors.Is(err, checkout.ErrCheckoutFailed):
		return fmt.Errorf("%w: %w", ErrRefused, err)
	case err != nil:
		return fmt.Errorf("comiccheckout: checkout %s: %w", order, err)
	}
	return nil
}

// order returns the transaction's checkout order, creating it once.
func (p *Payments) order(ctx context.Context, txnID, user string, cents int64) (string, error) {
	key := orderPrefix + txnID
	if id, err := p.rdb.Get(ctx, key).Result(); err == nil {
		return id, nil
	} else if !errors.Is(err, redis.Nil) {
		return "", fmt.Errorf("comiccheckout: order of %s: %w", txnID, err)
	}
	st := p.svc.Store()
	if _, err := st.FindUser(ctx, user); err != nil {
		return "", fmt.Errorf("%w: payment %q: %w", ErrRefused, user, err)
	}
	item, err := st.CreateItem(ctx, cents)
	if err != nil {
		return "", fmt.Errorf("comiccheckout: item: %w", err)
	}
	if _, err := st.AddStock(ctx, item, 1); err != nil {
		return "", fmt.Errorf("comiccheckout: stock: %w", err)
	}
	order, err := st.CreateOrder(ctx, user)
	if err != nil {
		return "", fmt.Errorf("comiccheckout: order: %w", err)
	}
	if _, err := st.AddItem(ctx, order, item, 1); err != nil {
		return "", fmt.Errorf("comiccheckout: order line: %w", err)
	}
	ok, err := p.rdb.SetNX(ctx, key, order, keyTTL).Result()
	if err != nil {
		return "", fmt.Errorf("comiccheckout: record order of %s: %w", txnID, err)
	}
	if !ok { // a concurrent retry recorded its order first: use that one
		return p.rdb.Get(ctx, key).Result()
	}
	return order, nil
}

// Refund credits the buyer the price back, once per transaction.
func (p *Payments) Refund(ctx context.Context, txnID, payment string, cents int64) error {
	key := refundPrefix + txnID
	ok, err := p.rdb.SetNX(ctx, key, "1", keyTTL).Result()
	if err != nil {
		return fmt.Errorf("comiccheckout: refund mark of %s: %w", txnID, err)
	}
	if !ok {
		return nil // refunded before
	}
	if _, err := p.svc.Store().AddFunds(ctx, payment, cents); err != nil {
		// Not refunded: drop the mark so a retry refunds.
		_ = p.rdb.Del(context.WithoutCancel(ctx), key).Err()
		return fmt.Errorf("comiccheckout: refund %s: %w", txnID, err)
	}
	return nil
}
