package offer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"

	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/internal/rediskey"
	"github.com/dropstream/dropstream/internal/script"
)

// MaxOrderOffers bounds the offers of one order price.
const MaxOrderOffers = 16

// OfferQuantity is one line of an order.
type OfferQuantity struct {
	OfferID  string `json:"offerId"`
	Quantity int64  `json:"quantity"`
}

// OrderPriceRequest asks for the total of an order for one Combination.
type OrderPriceRequest struct {
	Quantities []OfferQuantity `json:"sellOfferQuantities"`
	Location   string          `json:"deliverToLocationId"`
	Delivery   string          `json:"deliveryMethodId"`
	Payment    string          `json:"paymentMethodId"`
}

// canonical validates r and returns it with its lines sorted by offer id.
func (r OrderPriceRequest) canonical() (OrderPriceRequest, error) {
	if len(r.Quantities) == 0 || len(r.Quantities) > MaxOrderOffers {
		return r, fmt.Errorf("%w: %d order lines, want 1..%d", ErrInvalidFilter, len(r.Quantities), MaxOrderOffers)
	}
	if !validID(r.Location) || !validID(r.Delivery) || !validID(r.Payment) {
		return r, fmt.Errorf("%w: deliverToLocationId, deliveryMethodId and paymentMethodId are required ids", ErrInvalidFilter)
	}
	c := r
	c.Quantities = slices.Clone(r.Quantities)
	slices.SortFunc(c.Quantities, func(a, b OfferQuantity) int { return strings.Compare(a.OfferID, b.OfferID) })
	for i, q := range c.Quantities {
		if !validID(q.OfferID) || q.Quantity < 1 || q.Quantity > MaxQuantity {
			return r, fmt.Errorf("%w: order line %q: want an offer id and a quantity of 1..%d", ErrInvalidFilter, clip.Marked(q.OfferID, maxQuoted), MaxQuantity)
		}
		if i > 0 && c.Quantities[i-1].OfferID == q.OfferID {
			return r, fmt.Errorf("%w: offer %q appears twice", ErrInvalidFilter, clip.Marked(q.OfferID, maxQuoted))
		}
	}
	return c, nil
}

// OrderPriceID is the orderPrice id of a request: hashID of its canonical form.
func OrderPriceID(r OrderPriceRequest) (string, error) {
	c, err := r.canonical()
	if err != nil {
		return "", err
	}
	id, _ := hashID(c)
	return id, nil
}

// Order price statuses.
const (
	PriceProcessing = "processing"
	PriceComplete   = "complete"
	PriceError      = "error"
)

// OrderPrice is an orderPrice record.
type OrderPrice struct {
	OrderPriceID string     `json:"orderPriceId"`
	Status       string     `json:"status"`
	Price        int64      `json:"price"`           // total in minor units, when complete
	Error        string     `json:"error,omitempty"` // the reason, when error
	ExpiresAt    *time.Time `json:"expiresAt,omitempty"`
	Cached       bool       `json:"cached"` // served from the cache
}

// beginPriceScript serves an unexpired record or reports a processing one
// (unless the keeper lags), else restarts it as processing and lists it
// live. KEYS record, live set; ARGV now, uid, processing timeout, key
// lifetime, request, lags, epoch, record id.
var beginPriceScript = redis.NewScript(`
local st = redis.call('HMGET', KEYS[1], 'status', 'expiry', 'startedAt', 'price', 'error')
local now = tonumber(ARGV[1])
if ARGV[6] ~= '1' then
  if (st[1] == 'complete' or st[1] == 'error') and tonumber(st[2]) > now then
    return {'hit', st[1], st[4] or '0', st[5] or '', st[2]}
  end
  if st[1] == 'processing' and tonumber(st[3]) + tonumber(ARGV[3]) > now then
    return {'processing', 'processing', '0', '', '0'}
  end
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'status', 'processing', 'uniqueRequestId', ARGV[2], 'startedAt', ARGV[1], 'request', ARGV[5], 'epoch', ARGV[7])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[4]), ARGV[8])
return {'miss', 'processing', '0', '', '0'}`)

// finishPriceScript records the outcome if the record is still this
// computation's. KEYS record; ARGV uid, status, price, error, expiry,
// key lifetime.
var finishPriceScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'uniqueRequestId') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[2], 'price', ARGV[3], 'error', ARGV[4], 'expiry', ARGV[5])
redis.call('HDEL', KEYS[1], 'uniqueRequestId')
redis.call('PEXPIRE', KEYS[1], ARGV[6])
return 1`)

// priceKeys returns the key of orderPrice record id and its partition's
// live records (record id → key expiry in Unix ms), for the keeper.
func (c Config) priceKeys(id string) (record, live string) {
	p := c.partition(id)
	return rediskey.Partition(Name, p, "offer", "price", id), c.priceLiveKey(p)
}

// priceLiveKey is priceKeys' live set of partition p.
func (c Config) priceLiveKey(p int) string {
	return rediskey.Partition(Name, p, "offer", "prices")
}

// ErrOfferNotFound is the reason of an order line whose offer does not exist.
var ErrOfferNotFound = errors.New("offer_not_found")

// OrderPrice returns an order's price from the cache, or computes and
// caches it for OrderPriceTTL; processing: another call computes it.
func (s *Flow) OrderPrice(ctx context.Context, req OrderPriceRequest) (OrderPrice, error) {
	c, err := req.canonical()
	if err != nil {
		return OrderPrice{}, err
	}
	id, _ := OrderPriceID(c)
	key, live := s.cfg.priceKeys(id)
	lags, epoch, err := s.guard(ctx)
	if err != nil {
		return OrderPrice{}, err
	}
	uid := randomID()
	now := s.cfg.Now()
	keep := (s.cfg.ProcessingTimeout + s.cfg.OrderPriceTTL).Milliseconds()
	body, _ := json.Marshal(c)
	raw, err := beginPriceScript.Run(ctx, s.rdb, []string{key, live}, now.UnixMilli(), uid,
		s.cfg.ProcessingTimeout.Milliseconds(), keep, body, lags, epoch, id).StringSlice()
	if err != nil || len(raw) != 5 {
		return OrderPrice{}, fmt.Errorf("offer: order price %s: %v %w", id, raw, err)
	}
	op := OrderPrice{OrderPriceID: id, Status: raw[1], Error: raw[3], ExpiresAt: msTime(raw[4])}
	op.Price, _ = strconv.ParseInt(raw[2], 10, 64)
	s.met.orderPrices.Add(ctx, 1, metric.WithAttributes(keyOutcome.String(raw[0])))
	if raw[0] != "miss" {
		op.Cached = raw[0] == "hit"
		return op, nil
	}
	price, reason, err := s.computePrice(ctx, c)
	if err != nil {
		return OrderPrice{}, err
	}
	op.Status, op.Price, op.Error = PriceComplete, price, ""
	if reason != nil {
		op.Status, op.Price, op.Error = PriceError, 0, reason.Error()
	}
	expiry := s.cfg.Now().Add(s.cfg.OrderPriceTTL)
	op.ExpiresAt = &expiry
	if err := finishPriceScript.Run(ctx, s.rdb, []string{key}, uid, op.Status, op.Price, op.Error,
		expiry.UnixMilli(), keep).Err(); err != nil {
		return OrderPrice{}, fmt.Errorf("offer: order price %s: %w", id, err)
	}
	return op, nil
}

// computePrice sums the order's lines; reason is set when the order has no
// price (an offer missing, a method not offered, ...).
func (s *Flow) computePrice(ctx context.Context, r OrderPriceRequest) (price int64, reason, err error) {
	for _, q := range r.Quantities {
		o, err := s.catalog.Get(ctx, q.OfferID)
		if errors.Is(err, ErrNotFound) {
			return 0, ErrOfferNotFound, nil
		}
		if err != nil {
			return 0, nil, err
		}
		kind, ok := s.cfg.kindOf(o.Handler)
		if !ok {
			return 0, nil, fmt.Errorf("offer %s: handler %q not configured", o.ID, o.Handler)
		}
		p, perr := kind.Price(&o, q.Quantity, Combination{Location: r.Location, Delivery: r.Delivery, Payment: r.Payment})
		if perr != nil {
			return 0, perr, nil
		}
		price += p
	}
	return price, nil, nil
}

// usePriceCache prices TagCombinations combinations from fresh orderPrice
// records ("search_hit"); the rest are computed.
func (s *Flow) usePriceCache(ctx context.Context, v *view, resultID string, prog *program) {
	e := prog.price
	if e == nil || e.LogicalTag != TagCombinations || len(prog.combos) == 0 || !v.holds(ctx, e.SellOfferID) {
		return
	}
	pipe := s.rdb.Pipeline()
	epochCmd := pipe.HGet(ctx, s.cfg.resultKeys(resultID).main, "epoch")
	cmds := make([]*redis.SliceCmd, len(prog.combos))
	for i, c := range prog.combos {
		id, err := OrderPriceID(OrderPriceRequest{Quantities: []OfferQuantity{{OfferID: e.SellOfferID, Quantity: e.OrderQuantity}},
			Location: c.Location, Delivery: c.Delivery, Payment: c.Payment})
		if err != nil {
			return
		}
		key, _ := s.cfg.priceKeys(id)
		cmds[i] = pipe.HMGet(ctx, key, "status", "price", "expiry", "epoch")
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

// maxPriceOrders bounds the orderPrice offer lists the keeper keeps.
const maxPriceOrders = 10000

// invalidatePrices deletes the live orderPrice records a change affects, or all.
func (s *Flow) invalidatePrices(ctx context.Context, k *keeper, changes []change, all bool) error {
	lives, err := readLive(ctx, s, s.cfg.priceLiveKey, k.priceOffers, maxPriceOrders, "request",
		func(id string) string { key, _ := s.cfg.priceKeys(id); return key },
		func(v string) ([]OfferQuantity, bool) {
			var r OrderPriceRequest
			if err := json.Unmarshal([]byte(v), &r); err != nil {
				return nil, false // gone meanwhile: nothing to invalidate
			}
			return r.Quantities, true
		})
	if err != nil {
		return fmt.Errorf("list live order prices: %w", err)
	}
	latest := map[string]int64{}
	for _, c := range changes {
		latest[c.id] = max(latest[c.id], c.epoch)
	}
	calls := chunkCalls(lives, nil, func(id string) ([]string, any, bool) {
		lines, ok := k.priceOffers[id]
		if !ok {
			return nil, nil, false
		}
		var e int64
		for _, l := range lines {
			e = max(e, latest[l.OfferID])
		}
		if all {
			e = allEpochs
		}
		key, _ := s.cfg.priceKeys(id)
		return []string{key}, e, e > 0
	})
	cmds, _ := priceInvalidateScript.RunAll(ctx, s.rdb, calls) // a failed load is each retried command's error
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			return fmt.Errorf("invalidate order prices: %w", err)
		}
	}
	return nil
}
