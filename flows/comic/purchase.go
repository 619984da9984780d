package comic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/flows/checkout"
	"github.com/dropstream/dropstream/internal/rediskey"
)

// SorryMessage is the answer to a buyer when the comic is gone.
const SorryMessage = "We're sorry, but we cannot complete this transaction. We'll notify you again if this comic becomess available in the future."

// ErrSoldOut: the comic was not in inventory; the buyer was refunded.
var ErrSoldOut = errors.New("comic: not in inventory")

// ErrPayment: the charge was declined; nothing was sold.
var ErrPayment = errors.New("comic: payment refused")

// ErrDeclined is wrapped by Payments.Charge when the charge surely did not
// happen; other errors leave the purchase in doubt.
var ErrDeclined = errors.New("comic: charge declined")

// Payments charges and refunds buyers. Both calls are idempotent by txnID:
// a retried purchase charges once and refunds once.
type Payments interface {
	// Charge charges cents for txnID; an error wrapping ErrDeclined means
	// nothing was charged, any other error that it is unknown.
	Charge(ctx context.Context, txnID, payment string, cents int64) error
	Refund(ctx context.Context, txnID, payment string, cents int64) error
}

// Sales sells comics out of inventory as a saga keyed by the transaction
// id: record (charging), charge, then one script that sells the comic or
// marks the record refunding; a refunding purchase is refunded and the
// buyer's notification record removed. Purchase with the same id, or
// Recover, resumes an interrupted purchase.
type Sales struct {
	rdb      redis.UniversalClient
	topics   Topics
	payments Payments
	// ledgerKey is notifier.DeliveryLedger.Key; nil: no ledger.
	ledgerKey func(tag, businessKey string) string
	now       func() time.Time
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

// Sale is the record of a sold comic.
type Sale struct {
	ComicID    string `json:"comic_id"`
	Gen        int64  `json:"gen"`
	Email      string `json:"email"`
	TxnID      string `json:"txn_id"`
	PriceCents int64  `json:"price_cents"`
	AtMs       int64  `json:"at_ms"`
}

// purchase is a purchase record.
type purchase struct {
	txn, id, email, payment, state string
	price                          int64
	// gen is the sold listing's generation (0 until sold).
	gen int64
}

// Purchase buys comic id for email, once per txnID (empty: DefaultTxnID).
// During a hold only a holder (by holdToken) may buy; others get a
// *HoldError. Errors: ErrSoldOut (refunded), ErrPayment (declined,
// nothing left behind); any other leaves the purchase in doubt, and
// calling again or Recover settles it.
func (s *Sales) Purchase(ctx context.Context, email, id, payment, txnID, holdToken string) (Receipt, error) {
	email, err := NormalizeEmail(email)
	if err != nil {
		return Receipt{}, err
	}
	tag := s.topics.tag(id)
	if txnID != "" && !checkout.ValidID(txnID) {
		return Receipt{}, &FieldError{Field: "txn_id", Reason: "want 1-64 characters of [A-Za-z0-9_-]"}
	}
	r, err := s.read(ctx, tag, id, txnID)
	if err != nil {
		return Receipt{}, err
	}
	if txnID == "" {
		txnID = DefaultTxnID(email, id, r.gen)
		if r.listing == nil {
			// Not in inventory: settle a retried transaction from its record.
			if r.record, r.known, err = s.record(ctx, tag, txnID); err != nil {
				return Receipt{}, err
			}
		}
	}
	if r.known {
		return s.settle(ctx, r.record, false)
	}
	if r.listing == nil {
		// Nothing charged: only the notification is forgotten.
		if ferr := s.Forget(ctx, id, email); ferr != nil {
			return Receipt{}, ferr
		}
		return Receipt{}, fmt.Errorf("%w: %s", ErrSoldOut, id)
	}
	l := *r.listing
	p := purchase{txn: txnID, id: id, email: email, payment: payment, state: txnCharging, price: l.Comic.PriceCents}
	st, err := beginPurchaseScript.Run(ctx, s.rdb, []string{purchaseKey(tag, txnID), purchasesKey(tag), holdKey(tag, id), lotteryKey(tag, id)},
		txnID, id, email, payment, p.price, s.now().UnixMilli(), l.Gen, holder(r.salt, holdToken)).Text()
	if err != nil {
		return Receipt{}, fmt.Errorf("comic: begin purchase %s: %w", txnID, err)
	}
	if ends, held := strings.CutPrefix(st, "hold:"); held {
		ms, _ := strconv.ParseInt(ends, 10, 64)
		return Receipt{}, &HoldError{EndsAt: time.UnixMilli(ms).UTC()}
	}
	if st != "new" {
		// A concurrent call of the same transaction began it.
		if p, _, err = s.record(ctx, tag, txnID); err != nil {
			return Receipt{}, err
		}
		return s.settle(ctx, p, false)
	}
	return s.settle(ctx, p, true)
}

// purchaseReads is what a purchase reads before it begins.
type purchaseReads struct {
	gen     int64    // the latest listing generation, read when txn is ""
	listing *Listing // nil: not in inventory
	salt    string   // the hold's token salt
	record  purchase // the transaction's record, when known
	known   bool
}

// read reads the listing, its hold and the transaction's record (or, for
// txn "", the generation) in one round trip (BENCHMARKS.md, comic flow,
// "Purchase").
func (s *Sales) read(ctx context.Context, tag, id, txn string) (purchaseReads, error) {
	pipe := s.rdb.Pipeline()
	inv := pipe.HGetAll(ctx, inventoryKey(tag, id))
	salt := pipe.HMGet(ctx, holdKey(tag, id), "salt")
	var gen *redis.StringCmd
	var rec *redis.MapStringStringCmd
	if txn == "" {
		gen = pipe.Get(ctx, genKey(tag, id))
	} else {
		rec = pipe.HGetAll(ctx, purchaseKey(tag, txn))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return purchaseReads{}, fmt.Errorf("comic: purchase reads of %s: %w", id, err)
	}
	var r purchaseReads
	if m := inv.Val(); len(m) > 0 {
		l, err := listingOf(id, m)
		if err != nil {
			return purchaseReads{}, err
		}
		r.listing = &l
	}
	r.salt = str(salt.Val()[0])
	if gen != nil {
		r.gen, _ = strconv.ParseInt(gen.Val(), 10, 64)
	} else {
		r.record, r.known = recordOf(txn, rec.Val())
	}
	return r, nil
}

// record reads a purchase record; ok is false when there is none.
func (s *Sales) record(ctx context.Context, tag, txn string) (purchase, bool, error) {
	m, err := s.rdb.HGetAll(ctx, purchaseKey(tag, txn)).Result()
	if err != nil {
		return purchase{}, false, fmt.Errorf("comic: purchase %s: %w", txn, err)
	}
	p, ok := recordOf(txn, m)
	return p, ok, nil
}

// recordOf decodes a purchase record; ok is false when it is empty.
func recordOf(txn string, m map[string]string) (p purchase, ok bool) {
	if len(m) == 0 {
		return purchase{}, false
	}
	price, _ := strconv.ParseInt(m["price"], 10, 64)
	gen, _ := strconv.ParseInt(m["gen"], 10, 64)
	return purchase{txn: txn, id: m["comic"], email: m["email"], payment: m["payment"], state: m["state"], price: price, gen: gen}, true
}

// settle drives a purchase to its end; fresh marks the call that began it.
func (s *Sales) settle(ctx context.Context, p purchase, fresh bool) (Receipt, error) {
	tag := s.topics.tag(p.id)
	rec := Receipt{TxnID: p.txn, ComicID: p.id, Email: p.email, PriceCents: p.price, Gen: p.gen}
	switch p.state {
	case txnCharging:
		err := s.payments.Charge(ctx, p.txn, p.payment, p.price)
		if errors.Is(err, ErrDeclined) {
			if derr := declinedScript.Run(ctx, s.rdb, []string{purchaseKey(tag, p.txn), purchasesKey(tag)}, p.txn).Err(); derr != nil {
				return Receipt{}, fmt.Errorf("comic: close declined purchase %s: %w", p.txn, derr)
			}
			return Receipt{}, fmt.Errorf("%w: %w", ErrPayment, err)
		}
		if err != nil {
			return Receipt{}, fmt.Errorf("comic: charge %s (in doubt; retry the transaction): %w", p.txn, err)
		}
		now := s.now().UnixMilli()
		sale, _ := json.Marshal(Sale{ComicID: p.id, Email: p.email, TxnID: p.txn, PriceCents: p.price, AtMs: now})
		res, err := sellScript.Run(ctx, s.rdb, []string{inventoryKey(tag, p.id), saleKey(tag, p.id), inventoryIndex(tag),
			eventsStream(s.topics, p.id), purchaseKey(tag, p.txn), purchasesKey(tag)},
			p.id, sale, jsonString(p.email), jsonString(p.txn), p.price, now, flow.TraceIDFrom(ctx), p.txn).Slice()
		if err != nil {
			return Receipt{}, fmt.Errorf("comic: sell %s (in doubt; retry the transaction): %w", p.id, err)
		}
		state, _ := res[0].(string)
		p.gen, _ = res[1].(int64)
		p.state = state
		return s.settle(ctx, p, fresh && state == txnSold)
	case txnSold:
		if rec.Gen == 0 {
			rec.Gen, _ = s.rdb.HGet(ctx, purchaseKey(tag, p.txn), "gen").Int64()
		}
		rec.Repeated = !fresh
		return rec, nil
	case txnRefunding:
		if err := s.payments.Refund(ctx, p.txn, p.payment, p.price); err != nil {
			return Receipt{}, fmt.Errorf("comic: refund %s (in doubt; retry the transaction): %w", p.txn, err)
		}
		ev, _ := json.Marshal(Event{Kind: EventForgotten, ComicID: p.id, AtMs: s.now().UnixMilli(), Email: p.email, TraceID: flow.TraceIDFrom(ctx)})
		err := refundedScript.Run(ctx, s.rdb, []string{purchaseKey(tag, p.txn), purchasesKey(tag), notifiedKey(tag, p.id),
			s.ledgerRecord(tag, p.id, p.email), eventsStream(s.topics, p.id)}, p.txn, p.email, ev, p.id).Err()
		if err != nil {
			return Receipt{}, fmt.Errorf("comic: close refunded purchase %s: %w", p.txn, err)
		}
		return Receipt{}, fmt.Errorf("%w: %s", ErrSoldOut, p.id)
	case txnRefunded:
		return Receipt{}, fmt.Errorf("%w: %s", ErrSoldOut, p.id)
	}
	return Receipt{}, fmt.Errorf("comic: purchase %s in unknown state %q", p.txn, p.state)
}

// Recover settles purchases in doubt longer than olderThan; it returns how many.
func (s *Sales) Recover(ctx context.Context, olderThan time.Duration) (int, error) {
	settled := 0
	err := eachDue(ctx, s.rdb, s.topics, purchasesKey, s.now().Add(-olderThan).UnixMilli(), func(tag, txn string) error {
		rec, ok, err := s.record(ctx, tag, txn)
		if err == nil && !ok {
			err = s.rdb.ZRem(ctx, purchasesKey(tag), txn).Err() // expired record
		} else if err == nil {
			_, err = s.settle(ctx, rec, false)
		}
		if err != nil && !errors.Is(err, ErrSoldOut) && !errors.Is(err, ErrPayment) {
			return err
		}
		settled++
		return nil
	})
	return settled, err
}

// ledgerRecord is the delivery ledger key of email's notification of id.
func (s *Sales) ledgerRecord(tag, id, email string) string {
	if s.ledgerKey == nil {
		return rediskey.Key(tag, "comic", "noledger")
	}
	return s.ledgerKey(tag, businessKey(id, email))
}

// Forget removes email's notification record of comic id, so the next
// listing notifies them again.
func (s *Sales) Forget(ctx context.Context, id, email string) error {
	tag := s.topics.tag(id)
	lk := s.ledgerRecord(tag, id, email)
	ev, _ := json.Marshal(Event{Kind: EventForgotten, ComicID: id, AtMs: s.now().UnixMilli(), Email: email, TraceID: flow.TraceIDFrom(ctx)})
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

// DefaultTxnID is one transaction per (email, comic, listing generation).
func DefaultTxnID(email, comicID string, gen int64) string {
	return "t" + hashHex([]byte(email+"\x00"+comicID+"\x00"+strconv.FormatInt(gen, 10)))
}
