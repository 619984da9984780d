package comic

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/flows/checkout"
	"github.com/dropstream/dropstream/internal/rediskey"
	"github.com/dropstream/dropstream/internal/tenancy"
)

// orderPrefix names a transaction's checkout order, in the adapter's own
// slot: string per txn.
const orderPrefix = rediskey.Prefix + "{comic-pay}:comic:pay:order:"

// keyTTL bounds how long a transaction's order and refund marks are kept.
const keyTTL = 30 * 24 * time.Hour

// CheckoutPayments implements Payments over a running checkout.Flow: a
// charge checks out a one-line order; a refund credits the buyer once per
// transaction.
type CheckoutPayments struct {
	rdb redis.UniversalClient
	co  *checkout.Flow
}

// NewCheckoutPayments returns the adapter over the checkout flow co.
func NewCheckoutPayments(rdb redis.UniversalClient, co *checkout.Flow) *CheckoutPayments {
	return &CheckoutPayments{rdb: rdb, co: co}
}

// ErrCheckoutRefused (wrapping ErrDeclined) is a charge the saga refused;
// other Charge errors leave the outcome unknown.
var ErrCheckoutRefused = fmt.Errorf("comic: checkout: charge refused: %w", ErrDeclined)

// Charge checks out the transaction's order; see CheckoutPayments.
func (p *CheckoutPayments) Charge(ctx context.Context, txnID, payment string, cents int64) error {
	order, err := p.order(ctx, txnID, payment, cents)
	if err != nil {
		return err
	}
	_, err = p.co.Checkout(ctx, order)
	switch {
	case errors.Is(err, checkout.ErrCheckoutFailed):
		return fmt.Errorf("%w: %w", ErrCheckoutRefused, err)
	case err != nil:
		return fmt.Errorf("comic: checkout: checkout %s: %w", order, err)
	}
	return nil
}

// order returns the transaction's checkout order, creating it once.
func (p *CheckoutPayments) order(ctx context.Context, txnID, user string, cents int64) (string, error) {
	key := orderPrefix + txnID
	if id, err := p.rdb.Get(ctx, key).Result(); err == nil {
		return id, nil
	} else if !errors.Is(err, redis.Nil) {
		return "", fmt.Errorf("comic: checkout: order of %s: %w", txnID, err)
	}
	st := p.co.Store()
	if _, err := st.FindUser(ctx, user); err != nil {
		return "", fmt.Errorf("%w: payment %q: %w", ErrCheckoutRefused, user, err)
	}
	item, err := st.CreateItemOf(ctx, tenancy.Open, cents)
	if err != nil {
		return "", fmt.Errorf("comic: checkout: item: %w", err)
	}
	if _, err := st.AddStock(ctx, item, 1); err != nil {
		return "", fmt.Errorf("comic: checkout: stock: %w", err)
	}
	order, err := st.CreateOrder(ctx, user)
	if err != nil {
		return "", fmt.Errorf("comic: checkout: order: %w", err)
	}
	if _, err := st.AddItem(ctx, order, item, 1); err != nil {
		return "", fmt.Errorf("comic: checkout: order line: %w", err)
	}
	ok, err := p.rdb.SetNX(ctx, key, order, keyTTL).Result()
	if err != nil {
		return "", fmt.Errorf("comic: checkout: record order of %s: %w", txnID, err)
	}
	if !ok { // a concurrent retry recorded its order first: use that one
		return p.rdb.Get(ctx, key).Result()
	}
	return order, nil
}

// refundScript credits a user once per transaction. KEYS user hash,
// refund mark; ARGV amount, max credit, mark expiry s. Returns 1 credited,
// 0 credited before, -1 unknown user, -2 past the maximum.
var refundScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
local v = redis.call('HGET', KEYS[1], 'credit')
if not v then return -1 end
if tonumber(v) + tonumber(ARGV[1]) > tonumber(ARGV[2]) then return -2 end
redis.call('HINCRBY', KEYS[1], 'credit', ARGV[1])
redis.call('SET', KEYS[2], '1', 'EX', ARGV[3])
return 1`)

// Refund credits the buyer back once per transaction: credit and refund
// mark are written by one script.
func (p *CheckoutPayments) Refund(ctx context.Context, txnID, payment string, cents int64) error {
	if !checkout.ValidID(payment) || cents < 0 || cents > checkout.MaxAmount {
		return fmt.Errorf("comic: checkout: refund %s: invalid user %q or amount %d", txnID, payment, cents)
	}
	keys := p.co.Store().Keys()
	mark := rediskey.Key(keys.Tag(keys.Partition(payment)), "comic", "pay", "refund", txnID)
	res, err := refundScript.Run(ctx, p.rdb, []string{keys.User(payment), mark}, cents, int64(checkout.MaxAmount), int64(keyTTL/time.Second)).Int()
	switch {
	case err != nil:
		return fmt.Errorf("comic: checkout: refund %s: %w", txnID, err)
	case res == -1:
		return fmt.Errorf("comic: checkout: refund %s: user %s: %w", txnID, payment, checkout.ErrNotFound)
	case res == -2:
		return fmt.Errorf("comic: checkout: refund %s: credit of %s would pass the maximum: %w", txnID, payment, checkout.ErrInvalid)
	}
	return nil
}
