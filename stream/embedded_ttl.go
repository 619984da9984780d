package stream

import (
	"context"
	"time"

	"github.com/dropstream/dropstream/internal/tick"
)

// BoundTTLs cuts, every period until ctx ends, any TTL of the embedded
// Redis longer than maxTTL to maxTTL (keys without a TTL are left alone):
// records kept "for a week" would otherwise grow the process's heap. A
// ledger's idempotence window becomes maxTTL, so choose it longer than any
// redelivery the process can see. Each period also drops what the server
// keeps of deleted keys (pruneKeyVersions).
func (e *Embedded) BoundTTLs(ctx context.Context, maxTTL, period time.Duration) {
	tick.Every(ctx, period, func() { e.boundTTLs(maxTTL) })
}

func (e *Embedded) boundTTLs(maxTTL time.Duration) {
	pruneKeyVersions(e.srv)
	for _, k := range e.srv.Keys() {
		if e.srv.TTL(k) > maxTTL {
			e.srv.SetTTL(k, maxTTL)
		}
	}
}
