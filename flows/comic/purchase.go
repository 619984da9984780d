package comic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// SorryMessage is the seed's answer when the comic is gone.
const SorryMessage = "We're sorry, but we cannot complete this transaction. We'll notify you again if this comic becomess available in the future."

// ErrSoldOut: the comic was not in inventory; the buyer was refunded.
var ErrSoldOut = errors.New("comic: not in inventory")

// ErrPayment: the charge was refused; nothing was sold.
var ErrPayment = errors.New("comic: payment refused")

// Payments charges and refunds buyers. Both calls are idempotent by txnID:
// a retried purchase charges once.
type Payments interface {
	Charge(ctx context.Context, txnID, payment string, cents int64) error
	Refund(ctx context.Context, txnID, payment string, cents int64) error
}

// Sales sells comics out of inventory: the sale itself (remove from
// inventory, record the sale, emit the "sold" event) is one script, so of
// concurrent buyers of one comic exactly one wins. Losers are refunded and
// their notification record is removed, so they are notified again if the
// comic comes back.
type Sales struct {
	rdb      redis.UniversalClient
	topics   Topics
	inv      *Inventory
	payments Payments
	// ledgerKey returns the delivery ledger key of a business key in a
	// hash tag (notifier.DeliveryLedger.Key); nil when there is none.
	ledgerKey func(tag, businessKey string) string
	now       func() time.Time
}

// NewSales returns the sales over inv; ledgerKey names the delivery ledger
// record to forget on a refund.
func NewSales(rdb redis.UniversalClient, topics Topics, inv *Inventory, p Payments, ledgerKey func(tag, businessKey string) string) *Sales {
	return &Sales{rdb: rdb, topics: topics, inv: inv, payments: p, ledgerKey: ledgerKey, now: time.Now}
}

// Receipt is the result of a purchase.
type Receipt struct {
	TxnID      string `json:"txn_id"`
	ComicID    string `json:"comic_id"`
	Email      string `json:"email"`
	PriceCents int64  `json:"price_cents"`
	Gen        int64  `json:"gen"`
	// Repeated is true when this transaction had completed before.
	Repeated bool `json:"repeated"`
}

// Purchase buys comic id for email with payment, once per txnID: it reads
// the listing, charges its price, then sells it atomically. When the comic
// is gone (sold to a concurrent buyer, or never listed) the charge is
// refunded, the buyer's notification for it is forgotten, and the error
// wraps ErrSoldOut. A refused charge wraps ErrPayment.
func (s *Sales) Purchase(ctx context.Context, email, id, payment, txnID string) (Receipt, error) {
	email, err := NormalizeEmail(email)
	if err != nil {
		return Receipt{}, err
	}
	if !validTxn(txnID) {
		return Receipt{}, &FieldError{Field: "txn_id", Reason: "want 1-64 characters of [A-Za-z0-9_-]"}
	}
	tag := s.topics.tag(id)
	if gen, err := s.rdb.Get(ctx, purchaseKey(tag, txnID)).Int64(); err == nil {
		return Receipt{TxnID: txnID, ComicID: id, Email: email, Gen: gen, Repeated: true}, nil
	}
	l, err := s.inv.Get(ctx, id)
	if errors.Is(err, ErrNotFound) {
		// Nothing charged: only the notification is forgotten.
		if ferr := s.Forget(ctx, id, email); ferr != nil {
			return Receipt{}, ferr
		}
		return Receipt{}, fmt.Errorf("%w: %s", ErrSoldOut, id)
	}
	if err != nil {
		return Receipt{}, err
	}
	price := l.Comic.PriceCents
	if err := s.payments.Charge(ctx, txnID, payment, price); err != nil {
		return Receipt{}, fmt.Errorf("%w: %w", ErrPayment, err)
	}
	now := s.now().UnixMilli()
	sale, _ := json.Marshal(Sale{ComicID: id, Email: email, TxnID: txnID, PriceCents: price, AtMs: now})
	res, err := sellScript.Run(ctx, s.rdb, []string{inventoryKey(tag, id), saleKey(tag, id), inventoryIndex(tag),
		eventsStream(s.topics, id), purchaseKey(tag, txnID)},
		id, sale, jsonString(email), jsonString(txnID), price, now, traceIDOf(ctx)).Slice()
	if err != nil {
		// Unknown whether it sold: the charge stands and a retry of the
		// same transaction settles it (sold → receipt, gone → refund).
		return Receipt{}, fmt.Errorf("comic: sell %s: %w", id, err)
	}
	code, _ := res[0].(int64)
	if code == 0 {
		if err := s.payments.Refund(ctx, txnID, payment, price); err != nil {
			return Receipt{}, fmt.Errorf("comic: refund %s: %w", txnID, err)
		}
		if err := s.Forget(ctx, id, email); err != nil {
			return Receipt{}, err
		}
		return Receipt{}, fmt.Errorf("%w: %s", ErrSoldOut, id)
	}
	gen, _ := res[1].(int64)
	return Receipt{TxnID: txnID, ComicID: id, Email: email, PriceCents: price, Gen: gen, Repeated: code == 2}, nil
}

// Forget removes email's notification record of comic id (the history
// entry and the delivery ledger's record), so the next listing of the
// comic notifies them again.
func (s *Sales) Forget(ctx context.Context, id, email string) error {
	tag := s.topics.tag(id)
	bk := "comic:" + id + ":" + hashHex([]byte(email))
	lk := "ds:" + tag + ":comic:noledger"
	if s.ledgerKey != nil {
		lk = s.ledgerKey(tag, bk)
	}
	ev, _ := json.Marshal(Event{Kind: EventForgotten, ComicID: id, AtMs: s.now().UnixMilli(), Email: email, TraceID: traceIDOf(ctx)})
	if err := forgetScript.Run(ctx, s.rdb, []string{notifiedKey(tag, id), lk, eventsStream(s.topics, id)}, email, ev, id).Err(); err != nil {
		return fmt.Errorf("comic: forget notification of %s: %w", id, err)
	}
	return nil
}

// Sales returns the sales of a comic, oldest first.
func (s *Sales) Sales(ctx context.Context, id string) ([]Sale, error) {
	raw, err := s.rdb.LRange(ctx, saleKey(s.topics.tag(id), id), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("comic: sales of %s: %w", id, err)
	}
	out := make([]Sale, 0, len(raw))
	for _, r := range raw {
		var sale Sale
		if err := json.Unmarshal([]byte(r), &sale); err != nil {
			return nil, fmt.Errorf("comic: decode sale of %s: %w", id, err)
		}
		out = append(out, sale)
	}
	return out, nil
}

func validTxn(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// DefaultTxnID is the transaction id of a purchase that names none: one
// per (email, comic), so a retried request buys once.
func DefaultTxnID(email, comicID string) string {
	return "t" + hashHex([]byte(email+"\x00"+comicID))
}
