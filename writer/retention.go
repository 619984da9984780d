package writer

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// sweepPage is how many index entries Sweep checks per round trip.
const sweepPage = 1000

// Sweep removes expired entities from every index and returns how many. It
// costs O(entities); it is safe alongside the stage.
func (p *Projection) Sweep(ctx context.Context) (removed int, err error) {
	for part := range p.cfg.Partitions {
		all := indexKey(p.topic.HashTag(part), "")
		lo := "-"
		for {
			members, err := p.rdb.ZRangeByLex(ctx, all, &redis.ZRangeBy{Min: lo, Max: "+", Count: sweepPage}).Result()
			if err != nil {
				return removed, fmt.Errorf("writer: sweep: %w", err)
			}
			if len(members) == 0 {
				break
			}
			exists := make([]*redis.IntCmd, len(members))
			_, err = p.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
				for i, m := range members {
					exists[i] = pipe.Exists(ctx, keysOf(p.topic.HashTag(part), m).entity)
				}
				return nil
			})
			if err != nil {
				return removed, fmt.Errorf("writer: sweep: %w", err)
			}
			var gone []position
			for i, c := range exists {
				if c.Val() == 0 {
					gone = append(gone, position{members[i], part})
				}
			}
			if err := p.unindex(ctx, gone); err != nil {
				return removed, err
			}
			removed += len(gone)
			if len(members) < sweepPage {
				break
			}
			lo = "(" + members[len(members)-1]
		}
	}
	return removed, nil
}

// unindex removes entities whose hash is still gone from their indexes, by
// EVAL (EVALSHA cannot fall back inside a pipeline).
func (p *Projection) unindex(ctx context.Context, gone []position) error {
	if len(gone) == 0 {
		return nil
	}
	_, err := p.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for _, g := range gone {
			tag := p.topic.HashTag(g.part)
			k := keysOf(tag, g.key)
			unindexScript.Eval(ctx, pipe, []string{k.entity, k.all, k.open, k.closed}, g.key)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("writer: unindex: %w", err)
	}
	return nil
}

// unindexScript removes ARGV[1] from the index sets KEYS[2..4] unless the
// entity hash KEYS[1] exists.
var unindexScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
for i = 2, #KEYS do redis.call('ZREM', KEYS[i], ARGV[1]) end
return 1
`)
