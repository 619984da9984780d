package stream

import (
	"context"
	"time"
)

// BoundTTLs shortens, every period until ctx ends, the time to live of any
// key of the embedded Redis that expires later than maxTTL to maxTTL. Keys
// without a TTL are left alone.
//
// Records kept "for a week" (notification history, delivery ledgers) are
// what make a long-running embedded process grow: its data lives in the
// process's heap and dies with it anyway. Bounding them bounds the embedded
// mode's memory; it also bounds the windows those records stand for (a
// ledger's idempotence window becomes maxTTL), so choose maxTTL longer than
// any redelivery the process can see (its trim age, its claim timeouts).
func (e *Embedded) BoundTTLs(ctx context.Context, maxTTL, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		e.boundTTLs(maxTTL)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (e *Embedded) boundTTLs(maxTTL time.Duration) {
	for _, k := range e.srv.Keys() {
		if e.srv.TTL(k) > maxTTL {
			e.srv.SetTTL(k, maxTTL)
		}
	}
}
