package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/tick"
)

// demoEntityPatterns match the checkout entities created through the API
// (items, users, orders). A store keeps them with no TTL; in the demo they
// would pile up with every checkout a user tries.
var demoEntityPatterns = []string{"*:co:item:*", "*:co:user:*", "*:co:order:*"}

// expireDemoEntities gives ttl to every key matched by demoEntityPatterns
// that has none, but the seeded ones (ids of digits only, as BatchInit and
// the demo's seed make them: a store's API ids are hex). On the embedded
// Redis only: KEYS walks the whole keyspace.
func expireDemoEntities(ctx context.Context, rdb redis.UniversalClient, ttl time.Duration) error {
	var keys []string
	for _, pat := range demoEntityPatterns {
		ks, err := rdb.Keys(ctx, pat).Result()
		if err != nil {
			return fmt.Errorf("demo entities %s: %w", pat, err)
		}
		for _, k := range ks {
			if !seededID(k[strings.LastIndexByte(k, ':')+1:]) {
				keys = append(keys, k)
			}
		}
	}
	if len(keys) == 0 {
		return nil
	}
	// EXPIRE … NX sets a TTL only where there is none.
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.ExpireNX(ctx, k, ttl)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("demo entities: expire: %w", err)
	}
	return nil
}

// seededID reports whether id is made of digits only.
func seededID(id string) bool {
	if id == "" {
		return false
	}
	for _, c := range id {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// boundDemoEntities runs expireDemoEntities every period until ctx ends;
// a failed round is logged and retried at the next.
func (a *app) boundDemoEntities(ctx context.Context, ttl, period time.Duration) {
	tick.Every(ctx, period, func() {
		if err := expireDemoEntities(ctx, a.rdb, ttl); err != nil && ctx.Err() == nil {
			a.log.Warn("demo: bounding checkout entities failed", "error", err)
		}
	})
}
