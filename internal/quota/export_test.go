package quota

import (
	"context"
	"fmt"
)

// Count returns how many records owner holds.
func (q *Quota) Count(ctx context.Context, owner string) (int64, error) {
	n, err := q.rdb.SCard(ctx, q.ownerKey(owner)).Result()
	if err != nil {
		return 0, fmt.Errorf("quota: count %s: %w", q.kind, err)
	}
	return n, nil
}
