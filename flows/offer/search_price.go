package offer

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel/metric"
)

// usePriceCache prices TagCombinations combinations from fresh orderPrice
// records ("search_hit"); the rest are computed.
func (s *Flow) usePriceCache(ctx context.Context, v *view, resultID string, prog *program) {
	e := prog.price
	if e == nil || e.LogicalTag != TagCombinations || len(prog.combos) == 0 || !v.holds(ctx, e.SellOfferID) {
		return
	}
	pipe := s.rdb.Pipeline()
	epochCmd := pipe.HGet(ctx, s.cfg.resultKeys(resultID).main, "epoch")
	keys := make([]string, len(prog.combos))
	for i, c := range prog.combos {
		id, err := OrderPriceID(OrderPriceRequest{Quantities: []OfferQuantity{{OfferID: e.SellOfferID, Quantity: e.OrderQuantity}},
			Location: c.Location, Delivery: c.Delivery, Payment: c.Payment})
		if err != nil {
			return
		}
		keys[i], _ = s.cfg.priceKeys(id)
	}
	cmds := make([]interface{ Val() []any }, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.HMGet(ctx, k, "status", "price", "expiry", "epoch")
	}
	_, _ = pipe.Exec(ctx)
	resultEpoch, err := strconv.ParseInt(epochCmd.Val(), 10, 64)
	if err != nil {
		return
	}
	now := s.cfg.Now().UnixMilli()
	cached, prices := map[Combination]bool{}, map[Combination]int64{}
	for i, c := range prog.combos {
		f := cmds[i].Val()
		if len(f) != 4 {
			continue
		}
		status, _ := f[0].(string)
		price, perr := strconv.ParseInt(str(f[1]), 10, 64)
		expiry, _ := strconv.ParseInt(str(f[2]), 10, 64)
		epoch, eerr := strconv.ParseInt(str(f[3]), 10, 64)
		if eerr != nil || epoch < resultEpoch || expiry <= now {
			continue
		}
		switch {
		case status == PriceComplete && perr == nil:
			cached[c], prices[c] = true, price
		case status == PriceError:
			cached[c] = false
		}
	}
	if len(cached) > 0 {
		prog.cached, prog.prices = cached, prices
		s.met.orderPrices.Add(ctx, int64(len(cached)), metric.WithAttributes(keyOutcome.String("search_hit")))
	}
}

func str(v any) string {
	s, _ := v.(string)
	return s
}
