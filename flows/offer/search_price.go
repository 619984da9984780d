package offer

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel/metric"
)

// usePriceCache has a search use the orderPrice cache where it applies: a
// TagCombinations element prices q units of one offer for each
// combination, and each of those prices is the orderPrice of a one-line
// order (the offer, q, the combination). The handler that holds the offer
// reads those records before evaluating, and takes a record's answer — a
// complete record's price, an error record's "no price" — instead of
// computing it when the record has not expired and reflects at least the
// catalog epoch the result being computed reflects (its epoch field). A
// change after that epoch is invalidated in the record by the freshness
// keeper, like in the result, which it invalidates too. A record missing,
// expired, processing or older than the result's epoch is computed as
// before; a Redis error here only means computing. The records used count
// as orderPrice lookups with outcome "search_hit".
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
