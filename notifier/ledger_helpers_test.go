package notifier

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/stream"
)

// The defaults of the configs' tags.
const (
	DefaultDeliverConcurrency = 64
	DefaultMaxInFlight        = 64
	DefaultUserAgent          = "dropstream-webhook/1"
	DefaultDeliveryTTL        = 30 * 24 * time.Hour
)

// Deliver delivers m's request to each target; it returns m's error.
func (d *Deliverer) Deliver(ctx context.Context, m *stream.Message, r Request) error {
	errs := []error{nil}
	d.dispatch.record(ctx, d.history, d.deliverAll(ctx, []*stream.Message{m}, []Request{r}, errs))
	return errs[0]
}

// Ledger returns the dispatcher's delivery ledger.
func (d *Dispatcher) Ledger() *DeliveryLedger { return d.ledger }

// ErrNoDelivery: the ledger holds no record under the key.
var ErrNoDelivery = errors.New("notifier: no delivery record")

// Get returns the record under key; errors wrap ErrNoDelivery.
func (l *DeliveryLedger) Get(ctx context.Context, key string) (DeliveryRecord, error) {
	raw, err := l.rdb.Get(ctx, key).Bytes()
	if errors.Is(err, redis.Nil) {
		return DeliveryRecord{}, fmt.Errorf("%w: %s", ErrNoDelivery, key)
	}
	if err != nil {
		return DeliveryRecord{}, fmt.Errorf("notifier: delivery record %s: %w", key, err)
	}
	var r DeliveryRecord
	if err := json.Unmarshal(raw, &r); err != nil {
		return DeliveryRecord{}, fmt.Errorf("notifier: decode delivery record %s: %w", key, err)
	}
	return r, nil
}

// handle decodes and delivers one message (a batch of one) and records
// the outcome; it schedules no retry.
func (d *Deliverer) handle(ctx context.Context, m *stream.Message) error {
	var r Request
	errs := []error{decodeRequest(m, &r)}
	d.dispatch.record(ctx, d.history, d.deliverAll(ctx, []*stream.Message{m}, []Request{r}, errs))
	return errs[0]
}

// claim fills rec's token, state and start and tries to take the lease.
func (l *DeliveryLedger) claim(ctx context.Context, key string, rec *DeliveryRecord) (claimResult, error) {
	recs := []DeliveryRecord{*rec}
	res, errs := l.claimAll(ctx, []string{key}, recs, nil)
	*rec = recs[0]
	return res[0], errs[0]
}

// release deletes the caller's claim so a retry may send.
func (l *DeliveryLedger) release(ctx context.Context, key string, rec DeliveryRecord) error {
	return l.settleAll(ctx, []settleOp{{key: key, rec: rec, kind: settleRelease}})[0]
}

// settleAll settles every op in one round trip (sent records by SET,
// rejections and releases by settleScript) and returns each op's error.
func (l *DeliveryLedger) settleAll(ctx context.Context, ops []settleOp) []error {
	if len(ops) == 0 {
		return nil
	}
	pipe := l.rdb.Pipeline()
	q := l.queueSettles(ctx, pipe, ops)
	_, _ = pipe.Exec(ctx)
	return l.settled(ctx, q)
}
