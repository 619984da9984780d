package offer

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/dropstream/dropstream/internal/clip"
)

// Bounds on an offer, checked by Offer.Validate.
const (
	MaxIDLength   = 128
	MaxPlans      = 32
	MaxMethods    = 32
	MaxLocations  = 256
	MaxQuantity   = 1_000_000_000
	MaxUnitAmount = 1_000_000_000_000 // minor units (cents)
)

// ErrInvalidOffer is wrapped by every validation error of an offer.
var ErrInvalidOffer = errors.New("invalid offer")

// ErrNotFound is returned for an offer or result that does not exist.
var ErrNotFound = errors.New("not found")

// Offer is a sell offer, held by exactly one handler (Handler, one of the
// configured handler tags). Amounts are integers in minor units (cents).
type Offer struct {
	ID        string      `json:"offerId"`
	Handler   string      `json:"handler"`
	ProductID string      `json:"productId"`
	SellerID  string      `json:"sellerId"`
	Quantity  int64       `json:"quantity" openapi:"optional"`
	Plans     []PricePlan `json:"pricePlans"`
	Delivery  []Method    `json:"deliveryMethods"`
	Payment   []Method    `json:"paymentMethods"`
	Locations []string    `json:"locations"`
}

// PricePlan prices an order of at least MinQuantity units at UnitPrice per
// unit. How plans combine depends on the handler's kind (see Kind).
type PricePlan struct {
	ID          string `json:"planId"`
	MinQuantity int64  `json:"minQuantity"`
	UnitPrice   int64  `json:"unitPrice" openapi:"optional"`
}

// Method is a delivery or payment method and the cost it adds to an order.
type Method struct {
	ID   string `json:"id"`
	Cost int64  `json:"cost" openapi:"optional"`
}

// Validate checks the offer's bounds and that its ids are unique.
func (o Offer) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for name, v := range map[string]string{"offerId": o.ID, "handler": o.Handler, "productId": o.ProductID, "sellerId": o.SellerID} {
		if !validID(v) {
			bad("%s %q: want 1-%d characters without control characters or '|'", name, clip.Marked(v, maxQuoted), MaxIDLength)
		}
	}
	if o.Quantity < 0 || o.Quantity > MaxQuantity {
		bad("quantity %d out of range 0..%d", o.Quantity, MaxQuantity)
	}
	if len(o.Plans) == 0 || len(o.Plans) > MaxPlans {
		bad("%d price plans, want 1..%d", len(o.Plans), MaxPlans)
	}
	seen := map[string]bool{}
	for _, p := range o.Plans {
		if !validID(p.ID) || seen["p"+p.ID] {
			bad("price plan id %q empty, too long or repeated", clip.Marked(p.ID, maxQuoted))
		}
		seen["p"+p.ID] = true
		if p.MinQuantity < 1 || p.MinQuantity > MaxQuantity || p.UnitPrice < 0 || p.UnitPrice > MaxUnitAmount {
			bad("price plan %q: minQuantity %d (1..%d) or unitPrice %d (0..%d) out of range", clip.Marked(p.ID, maxQuoted), p.MinQuantity, MaxQuantity, p.UnitPrice, MaxUnitAmount)
		}
	}
	for kind, ms := range map[string][]Method{"delivery": o.Delivery, "payment": o.Payment} {
		if len(ms) == 0 || len(ms) > MaxMethods {
			bad("%d %s methods, want 1..%d", len(ms), kind, MaxMethods)
		}
		for _, m := range ms {
			if !validID(m.ID) || seen[kind+m.ID] {
				bad("%s method id %q empty, too long or repeated", kind, clip.Marked(m.ID, maxQuoted))
			}
			seen[kind+m.ID] = true
			if m.Cost < 0 || m.Cost > MaxUnitAmount {
				bad("%s method %q: cost %d out of range 0..%d", kind, clip.Marked(m.ID, maxQuoted), m.Cost, MaxUnitAmount)
			}
		}
	}
	if len(o.Locations) == 0 || len(o.Locations) > MaxLocations {
		bad("%d locations, want 1..%d", len(o.Locations), MaxLocations)
	}
	for _, l := range o.Locations {
		if !validID(l) || seen["l"+l] {
			bad("location %q empty, too long or repeated", clip.Marked(l, maxQuoted))
		}
		seen["l"+l] = true
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidOffer, errors.Join(errs...))
	}
	return nil
}

// validID reports 1..MaxIDLength bytes without control characters or '|'.
func validID(s string) bool {
	return s != "" && len(s) <= MaxIDLength && !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '|' })
}

// maxQuoted bounds outside input quoted in an error (clip.Marked).
const maxQuoted = 40

// Kind is a handler's pricing rule.
type Kind string

// Handler kinds.
const (
	// KindStandard prices q units at the unit price of the plan with the
	// largest MinQuantity ≤ q (tiered pricing; ties: the lower price).
	KindStandard Kind = "standard"
	// KindAuction treats plans as bids: q units cost q times the highest
	// bid among plans with MinQuantity ≤ q.
	KindAuction Kind = "auction"
)

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool { return k == KindStandard || k == KindAuction }

// unitPrice is k's unit price of q units under plans; false if no plan applies.
func (k Kind) unitPrice(plans []PricePlan, q int64) (int64, bool) {
	best, bestMin, ok := int64(0), int64(0), false
	for _, p := range plans {
		if p.MinQuantity > q {
			continue
		}
		switch {
		case !ok:
			best, bestMin, ok = p.UnitPrice, p.MinQuantity, true
		case k == KindAuction:
			best = max(best, p.UnitPrice)
		case p.MinQuantity > bestMin || p.MinQuantity == bestMin && p.UnitPrice < best:
			best, bestMin = p.UnitPrice, p.MinQuantity
		}
	}
	return best, ok
}

// Reasons a combination has no price (the orderPrice "error" status).
var (
	ErrQuantityUnavailable = errors.New("quantity_unavailable")
	ErrLocationNotServed   = errors.New("location_not_served")
	ErrDeliveryNotOffered  = errors.New("delivery_method_not_offered")
	ErrPaymentNotOffered   = errors.New("payment_method_not_offered")
	ErrNoPricePlan         = errors.New("no_price_plan")
)

// Combination is one way of ordering: a location, delivery and payment method.
type Combination struct {
	Location string `json:"deliverToLocationId"`
	Delivery string `json:"deliveryMethodId"`
	Payment  string `json:"paymentMethodId"`
}

// Price returns q units of o under kind k for combination c: q × unit
// price plus both methods' costs, or one of the Err* reasons above.
func (k Kind) Price(o *Offer, q int64, c Combination) (int64, error) {
	if q < 1 || q > o.Quantity {
		return 0, ErrQuantityUnavailable
	}
	if !slices.Contains(o.Locations, c.Location) {
		return 0, ErrLocationNotServed
	}
	d, ok := methodCost(o.Delivery, c.Delivery)
	if !ok {
		return 0, ErrDeliveryNotOffered
	}
	p, ok := methodCost(o.Payment, c.Payment)
	if !ok {
		return 0, ErrPaymentNotOffered
	}
	unit, ok := k.unitPrice(o.Plans, q)
	if !ok {
		return 0, ErrNoPricePlan
	}
	return q*unit + d + p, nil
}

func methodCost(ms []Method, id string) (int64, bool) {
	for _, m := range ms {
		if m.ID == id {
			return m.Cost, true
		}
	}
	return 0, false
}

// Stats aggregate an offer's prices over a filter's priced combinations.
type Stats struct {
	Min     int64   `json:"minPrice"`
	Max     int64   `json:"maxPrice"`
	Average float64 `json:"averagePrice"`
	// Combinations is how many combinations had a price.
	Combinations int `json:"combinations"`
}

// Sample vocabularies of SampleOffers.
var (
	SampleDelivery  = []string{"post", "courier", "pickup"}
	SamplePayment   = []string{"card", "cash", "transfer"}
	SampleLocations = []string{"loc0", "loc1", "loc2", "loc3", "loc4", "loc5", "loc6", "loc7"}
)

// SampleOffers returns n deterministic offers round robin over handlers.
func SampleOffers(seed uint64, n, products int, handlers []HandlerSpec) []Offer {
	rng := rand.New(rand.NewPCG(seed, 0x0ff3))
	pick := func(from []string, k int) []string {
		out := make([]string, 0, k)
		for _, i := range rng.Perm(len(from))[:k] {
			out = append(out, from[i])
		}
		return out
	}
	out := make([]Offer, n)
	for i := range out {
		o := Offer{ID: "o" + strconv.Itoa(i), Handler: handlers[i%len(handlers)].Tag,
			ProductID: "p" + strconv.Itoa(rng.IntN(max(1, products))), SellerID: "s" + strconv.Itoa(rng.IntN(50)),
			Quantity: int64(rng.IntN(100)), Locations: pick(SampleLocations, 1+rng.IntN(4))}
		for j := range 1 + rng.IntN(3) {
			o.Plans = append(o.Plans, PricePlan{ID: "plan" + strconv.Itoa(j), MinQuantity: int64(1 + j*rng.IntN(10)), UnitPrice: int64(100 + rng.IntN(10000))})
		}
		for _, id := range pick(SampleDelivery, 1+rng.IntN(3)) {
			o.Delivery = append(o.Delivery, Method{ID: id, Cost: int64(rng.IntN(1000))})
		}
		for _, id := range pick(SamplePayment, 1+rng.IntN(3)) {
			o.Payment = append(o.Payment, Method{ID: id, Cost: int64(rng.IntN(300))})
		}
		out[i] = o
	}
	return out
}
