package offer

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	"github.com/dropstream/dropstream/internal/script"
)

// priceInvalidateScript deletes the orderPrice records a change after
// their epoch affects. KEYS the records; ARGV per record its offers'
// latest change epoch. Returns how many it deleted.
var priceInvalidateScript = script.New(`
local count = 0
for i = 1, #KEYS do
  local e = tonumber(redis.call('HGET', KEYS[i], 'epoch') or '0')
  if tonumber(ARGV[i]) > e then count = count + redis.call('DEL', KEYS[i]) end
end
return count`)

// maxPriceOrders bounds the offer lists of orderPrice records the keeper
// keeps.
const maxPriceOrders = 10000

// invalidatePrices deletes the live orderPrice records holding a changed
// offer, or all of them when all is set.
func (s *Flow) invalidatePrices(ctx context.Context, k *keeper, changes []change, all bool) error {
	lives, err := readLive(ctx, s, s.cfg.priceLiveKey, k.priceOffers, maxPriceOrders, "request",
		func(id string) string { key, _ := s.cfg.priceKeys(id); return key },
		func(v string) ([]string, bool) {
			var r OrderPriceRequest
			if err := json.Unmarshal([]byte(v), &r); err != nil {
				return nil, false // gone meanwhile: nothing to invalidate
			}
			ids := make([]string, len(r.Quantities))
			for i, q := range r.Quantities {
				ids[i] = q.OfferID
			}
			return ids, true
		})
	if err != nil {
		return fmt.Errorf("list live order prices: %w", err)
	}
	latest := map[string]int64{}
	for _, c := range changes {
		latest[c.id] = max(latest[c.id], c.epoch)
	}
	var calls []script.Call
	for _, l := range lives {
		var call script.Call
		for _, id := range l {
			offers, ok := k.priceOffers[id]
			if !ok {
				continue
			}
			var e int64
			for _, o := range offers {
				e = max(e, latest[o])
			}
			if all {
				e = math.MaxInt64
			}
			if e == 0 {
				continue
			}
			key, _ := s.cfg.priceKeys(id)
			call.Keys, call.Args = append(call.Keys, key), append(call.Args, e)
			if len(call.Keys) >= invalidateChunk {
				calls, call = append(calls, call), script.Call{}
			}
		}
		if len(call.Keys) > 0 {
			calls = append(calls, call)
		}
	}
	cmds, _ := priceInvalidateScript.RunAll(ctx, s.rdb, calls) // a failed load is each retried command's error
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			return fmt.Errorf("invalidate order prices: %w", err)
		}
	}
	return nil
}
