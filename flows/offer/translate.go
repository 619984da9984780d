package offer

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/clip"
)

// Translation types of the TranslateIds cache.
const (
	FromProduct   = "product"
	FromSeller    = "seller"
	ToSellOffer   = "sellOffer"
	epochField    = "" // the catalog epoch a translation was computed at
	maxTranslated = 100000
)

// TranslateCacheID is the TranslateIds cache id of a translation:
// fromType + "_" + fromId + "_" + toType.
func TranslateCacheID(fromType, fromID, toType string) string {
	return fromType + "_" + fromID + "_" + toType
}

// Translate returns the sorted ids of toType that fromID of fromType
// translates to, and whether they came from the cache (served while the
// catalog epoch is unchanged, at most TranslateTTL).
func (c *Catalog) Translate(ctx context.Context, fromType, fromID, toType string) (ids []string, cached bool, err error) {
	if fromType != FromProduct && fromType != FromSeller || toType != ToSellOffer || !validID(fromID) {
		return nil, false, fmt.Errorf("%w: translate %q %q to %q: want product or seller ids to sellOffer", ErrInvalidOffer, fromType, clip.Marked(fromID, maxQuoted), toType)
	}
	key := catalogKey("translate", TranslateCacheID(fromType, fromID, toType))
	pipe := c.rdb.Pipeline()
	rec := pipe.HGetAll(ctx, key)
	epoch := pipe.Get(ctx, epochKey)
	_, _ = pipe.Exec(ctx)
	if err := rec.Err(); err != nil {
		return nil, false, fmt.Errorf("translate cache: %w", err)
	}
	cur, err := epoch.Result()
	if err == redis.Nil {
		cur, err = "0", nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("catalog epoch: %w", err)
	}
	if m := rec.Val(); len(m) > 0 && m[epochField] == cur {
		delete(m, epochField)
		return slices.Sorted(maps.Keys(m)), true, nil
	}
	if ids, err = c.scan(ctx, fromType, fromID); err != nil {
		return nil, false, err
	}
	fields := make([]any, 0, 2+2*len(ids))
	fields = append(fields, epochField, cur)
	for _, id := range ids {
		fields = append(fields, id, "1")
	}
	tx := c.rdb.TxPipeline()
	tx.Del(ctx, key)
	tx.HSet(ctx, key, fields...)
	tx.PExpire(ctx, key, c.cfg.TranslateTTL)
	if _, err := tx.Exec(ctx); err != nil {
		return nil, false, fmt.Errorf("translate cache write: %w", err)
	}
	return ids, false, nil
}

// scan reads every handler's offers and keeps the ids whose product or
// seller is fromID.
func (c *Catalog) scan(ctx context.Context, fromType, fromID string) ([]string, error) {
	var ids []string
	for _, h := range c.cfg.Handlers {
		cursor := uint64(0)
		for {
			kv, next, err := c.rdb.HScan(ctx, offersKey(h.Tag), cursor, "", 1000).Result()
			if err != nil {
				return nil, fmt.Errorf("translate scan: %w", err)
			}
			for i := 0; i+1 < len(kv); i += 2 {
				var o struct {
					ProductID string `json:"productId"`
					SellerID  string `json:"sellerId"`
				}
				if err := json.Unmarshal([]byte(kv[i+1]), &o); err != nil {
					return nil, fmt.Errorf("translate scan: offer %s: %w", kv[i], err)
				}
				if fromType == FromProduct && o.ProductID == fromID || fromType == FromSeller && o.SellerID == fromID {
					ids = append(ids, kv[i])
				}
			}
			if len(ids) > maxTranslated {
				return nil, fmt.Errorf("translate %s %s: more than %d ids", fromType, clip.Marked(fromID, maxQuoted), maxTranslated)
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}
