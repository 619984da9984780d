package notifier

import (
	"context"

	"github.com/dropstream/dropstream/stream"
)

// handle decodes and delivers one message (a batch of one) and records
// the outcome; it schedules no retry.
func (d *Deliverer) handle(ctx context.Context, m *stream.Message) error {
	errs, recs := d.process(ctx, []*stream.Message{m})
	d.recordAll(ctx, recs)
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
