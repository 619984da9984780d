package offer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/dropstream/dropstream/internal/clip"
)

// Bounds on a filter, checked by Element.Validate.
const (
	MaxDepth        = 4
	MaxElements     = 32 // per group
	MaxListLength   = 64 // ids in one list
	MaxCombinations = 1024
)

// ErrInvalidFilter is wrapped by every validation error of a filter.
var ErrInvalidFilter = errors.New("invalid filter")

// Element types.
const (
	TypeGroup         = "group"
	TypeComplexFilter = "complexFilter"
	TypeLogical       = "logical"
)

// Logical tags: what a logical element tests.
const (
	TagProduct = "product" // keeps offers of one of ProductIDs.
	TagSeller  = "seller"  // keeps offers of one of SellerIDs.
	// TagCombinations keeps the offer SellOfferID when at least one
	// combination of the lists prices OrderQuantity units; its result
	// carries the price aggregates.
	TagCombinations = "sellOfferQuantityLocationIdCombinations"
	// TagAggregated keeps every offer with at least one priced combination
	// whose Aggregate price is within [MinPrice, MaxPrice] (when set); its
	// result carries the aggregates and is ordered by Aggregate.
	TagAggregated = "aggregatedSellOfferPrices"
)

// Aggregates of TagAggregated.
const (
	AggMin     = "minPrice"
	AggMax     = "maxPrice"
	AggAverage = "averagePrice"
)

// complexFilterTypes are the filterType values a complexFilter may carry.
var complexFilterTypes = []string{"sellOffer", "sellOfferPlan", "planDeliveryPaymentCombination", "orderPrice"}

// Element is a filter node: a group (all must hold), a complexFilter of
// another filterType, or a logical element by LogicalTag.
type Element struct {
	Type          string    `json:"type"`
	FilterType    string    `json:"filterType,omitempty"`
	Elements      []Element `json:"elements,omitempty"`
	ComplexFilter *Element  `json:"complexFilter,omitempty"`
	LogicalTag    string    `json:"logicalTag,omitempty"`

	SellOfferID          string   `json:"sellOfferId,omitempty"`
	ProductIDs           []string `json:"productIds,omitempty"`
	SellerIDs            []string `json:"sellerIds,omitempty"`
	OrderQuantity        int64    `json:"orderQuantity,omitempty"`
	DeliverToLocationIDs []string `json:"deliverToLocationIds,omitempty"`
	PaymentMethodIDs     []string `json:"paymentMethodIds,omitempty"`
	DeliveryMethodIDs    []string `json:"deliveryMethodIds,omitempty"`
	Aggregate            string   `json:"aggregate,omitempty"`
	MinPrice             *int64   `json:"minPrice,omitempty"`
	MaxPrice             *int64   `json:"maxPrice,omitempty"`
}

// Validate checks e as a search root: a bounded "sellOffer" group with at
// most one price element.
func (e Element) Validate() error {
	if e.Type != TypeGroup || e.FilterType != "sellOffer" {
		return fmt.Errorf("%w: the root must be a group of filterType sellOffer", ErrInvalidFilter)
	}
	prices := 0
	if err := e.validate(1, &prices); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidFilter, err)
	}
	if prices > 1 {
		return fmt.Errorf("%w: %d price elements (%s, %s), at most one allowed", ErrInvalidFilter, prices, TagCombinations, TagAggregated)
	}
	return nil
}

func (e Element) validate(depth int, prices *int) error {
	if depth > MaxDepth {
		return fmt.Errorf("nested deeper than %d", MaxDepth)
	}
	switch e.Type {
	case TypeGroup:
		if len(e.Elements) == 0 || len(e.Elements) > MaxElements {
			return fmt.Errorf("group of %d elements, want 1..%d", len(e.Elements), MaxElements)
		}
		if e.ComplexFilter != nil || e.LogicalTag != "" || e.priceFields() || len(e.ProductIDs)+len(e.SellerIDs) > 0 {
			return errors.New("a group holds only filterType and elements")
		}
		for i, c := range e.Elements {
			if err := c.validate(depth+1, prices); err != nil {
				return fmt.Errorf("elements[%d]: %w", i, err)
			}
		}
		return nil
	case TypeComplexFilter:
		c := e.ComplexFilter
		if c == nil || c.Type != TypeGroup || !slices.Contains(complexFilterTypes, c.FilterType) {
			return fmt.Errorf("a complexFilter holds a group of filterType %s", strings.Join(complexFilterTypes, ", "))
		}
		if len(e.Elements) > 0 || e.LogicalTag != "" || e.FilterType != "" || e.priceFields() || len(e.ProductIDs)+len(e.SellerIDs) > 0 {
			return errors.New("a complexFilter element holds only complexFilter")
		}
		if err := c.validate(depth+1, prices); err != nil {
			return fmt.Errorf("complexFilter: %w", err)
		}
		return nil
	case TypeLogical:
		if len(e.Elements) > 0 || e.ComplexFilter != nil || e.FilterType != "" {
			return errors.New("a logical element holds no elements")
		}
		return e.validateLogical(prices)
	}
	return fmt.Errorf("type %q: want group, complexFilter or logical", clip.Marked(e.Type, maxQuoted))
}

// priceFields reports whether e sets a field of a price element.
func (e Element) priceFields() bool {
	return e.SellOfferID != "" || e.OrderQuantity != 0 || len(e.DeliverToLocationIDs)+len(e.PaymentMethodIDs)+len(e.DeliveryMethodIDs) > 0 ||
		e.Aggregate != "" || e.MinPrice != nil || e.MaxPrice != nil
}

func (e Element) validateLogical(prices *int) error {
	lists := func(names []string, ls ...[]string) error {
		for i, l := range ls {
			if len(l) == 0 || len(l) > MaxListLength {
				return fmt.Errorf("%s: %d ids, want 1..%d", names[i], len(l), MaxListLength)
			}
			if j := slices.IndexFunc(l, func(id string) bool { return !validID(id) }); j >= 0 {
				return fmt.Errorf("%s: id %q empty, too long or with control characters", names[i], clip.Marked(l[j], maxQuoted))
			}
		}
		return nil
	}
	switch e.LogicalTag {
	case TagProduct:
		if e.priceFields() || len(e.SellerIDs) > 0 {
			return errors.New("a product element holds only productIds")
		}
		return lists([]string{"productIds"}, e.ProductIDs)
	case TagSeller:
		if e.priceFields() || len(e.ProductIDs) > 0 {
			return errors.New("a seller element holds only sellerIds")
		}
		return lists([]string{"sellerIds"}, e.SellerIDs)
	case TagCombinations, TagAggregated:
		*prices++
		if len(e.ProductIDs)+len(e.SellerIDs) > 0 {
			return errors.New("a price element holds no productIds or sellerIds")
		}
		if e.OrderQuantity < 1 || e.OrderQuantity > MaxQuantity {
			return fmt.Errorf("orderQuantity %d out of range 1..%d", e.OrderQuantity, MaxQuantity)
		}
		if err := lists([]string{"deliverToLocationIds", "paymentMethodIds", "deliveryMethodIds"},
			e.DeliverToLocationIDs, e.PaymentMethodIDs, e.DeliveryMethodIDs); err != nil {
			return err
		}
		if n := len(e.DeliverToLocationIDs) * len(e.PaymentMethodIDs) * len(e.DeliveryMethodIDs); n > MaxCombinations {
			return fmt.Errorf("%d combinations of locations, payment and delivery methods, at most %d", n, MaxCombinations)
		}
		if e.LogicalTag == TagCombinations {
			if !validID(e.SellOfferID) || e.Aggregate != "" || e.MinPrice != nil || e.MaxPrice != nil {
				return fmt.Errorf("%s needs a sellOfferId and takes no aggregate or price bounds", TagCombinations)
			}
			return nil
		}
		if e.SellOfferID != "" {
			return fmt.Errorf("%s takes no sellOfferId", TagAggregated)
		}
		if e.Aggregate != AggMin && e.Aggregate != AggMax && e.Aggregate != AggAverage {
			return fmt.Errorf("aggregate %q: want %s, %s or %s", clip.Marked(e.Aggregate, maxQuoted), AggMin, AggMax, AggAverage)
		}
		if e.MinPrice != nil && e.MaxPrice != nil && *e.MinPrice > *e.MaxPrice {
			return fmt.Errorf("minPrice %d above maxPrice %d", *e.MinPrice, *e.MaxPrice)
		}
		return nil
	}
	return fmt.Errorf("logicalTag %q: want %s, %s, %s or %s", clip.Marked(e.LogicalTag, maxQuoted), TagProduct, TagSeller, TagCombinations, TagAggregated)
}

// Canonical sorts and deduplicates e's id lists and sorts groups, so
// equivalent filters encode the same.
func (e Element) Canonical() Element {
	c := e
	for _, l := range []*[]string{&c.ProductIDs, &c.SellerIDs, &c.DeliverToLocationIDs, &c.PaymentMethodIDs, &c.DeliveryMethodIDs} {
		if len(*l) > 0 {
			s := slices.Clone(*l)
			slices.Sort(s)
			*l = slices.Compact(s)
		}
	}
	if e.ComplexFilter != nil {
		inner := e.ComplexFilter.Canonical()
		c.ComplexFilter = &inner
	}
	if len(e.Elements) > 0 {
		byJSON := map[string]Element{} // equal elements encode the same
		for _, el := range e.Elements {
			ce := el.Canonical()
			b, _ := json.Marshal(ce)
			byJSON[string(b)] = ce
		}
		c.Elements = make([]Element, 0, len(byJSON))
		for _, k := range slices.Sorted(maps.Keys(byJSON)) {
			c.Elements = append(c.Elements, byJSON[k])
		}
	}
	return c
}

// ResultID returns hashID of e.Canonical(): the logical result id and its JSON.
func ResultID(e Element) (id string, canonical []byte) { return hashID(e.Canonical()) }

// hashID returns the first 128 bits of the SHA-256 of v's JSON, in hex, and that JSON.
func hashID(v any) (string, []byte) {
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16]), b
}

// validResultID reports whether s looks like a ResultID.
func validResultID(s string) bool { return len(s) == 32 && strings.Trim(s, "0123456789abcdef") == "" }

// Match is one offer of a result.
type Match struct {
	OfferID string `json:"offerId"`
	Handler string `json:"handler"`
	Prices  *Stats `json:"prices,omitempty"` // nil without a price element
}

// program is a compiled filter: predicates (all must hold) and a price element.
type program struct {
	preds    []func(*Offer) bool
	products []string // the first product element's ids: only their offers match
	price    *Element
	combos   []Combination
	cached   map[Combination]bool // priced from the orderPrice cache
	prices   map[Combination]int64
}

// compile turns a validated filter into a program.
func compile(e Element) program {
	var p program
	p.add(e)
	if p.price != nil {
		for _, l := range p.price.DeliverToLocationIDs {
			for _, d := range p.price.DeliveryMethodIDs {
				for _, pay := range p.price.PaymentMethodIDs {
					p.combos = append(p.combos, Combination{Location: l, Delivery: d, Payment: pay})
				}
			}
		}
	}
	return p
}

func (p *program) add(e Element) {
	switch e.Type {
	case TypeGroup:
		for _, c := range e.Elements {
			p.add(c)
		}
	case TypeComplexFilter:
		p.add(*e.ComplexFilter)
	case TypeLogical:
		switch e.LogicalTag {
		case TagProduct:
			ids := slices.Clone(e.ProductIDs)
			if p.products == nil {
				p.products = ids
			}
			p.preds = append(p.preds, func(o *Offer) bool { return slices.Contains(ids, o.ProductID) })
		case TagSeller:
			ids := slices.Clone(e.SellerIDs)
			p.preds = append(p.preds, func(o *Offer) bool { return slices.Contains(ids, o.SellerID) })
		case TagCombinations, TagAggregated:
			el := e
			p.price = &el
		}
	}
}

// eval returns the offer's match and its ordering score; false: no match.
func (p *program) eval(o *Offer, kind Kind) (Match, float64, bool) {
	for _, pred := range p.preds {
		if !pred(o) {
			return Match{}, 0, false
		}
	}
	m := Match{OfferID: o.ID, Handler: o.Handler}
	if p.price == nil {
		return m, 0, true
	}
	if p.price.LogicalTag == TagCombinations && o.ID != p.price.SellOfferID {
		return Match{}, 0, false
	}
	st, ok := stats(o, kind, p.price.OrderQuantity, p.combos, p.cached, p.prices)
	if !ok {
		return Match{}, 0, false
	}
	m.Prices = &st
	score := float64(st.Min)
	switch p.price.Aggregate {
	case AggMax:
		score = float64(st.Max)
	case AggAverage:
		score = st.Average
	}
	if p.price.MinPrice != nil && score < float64(*p.price.MinPrice) || p.price.MaxPrice != nil && score > float64(*p.price.MaxPrice) {
		return Match{}, 0, false
	}
	return m, score, true
}

// stats aggregates q units of o over combos, using cached prices where
// set; false when none has a price.
func stats(o *Offer, kind Kind, q int64, combos []Combination, cached map[Combination]bool, prices map[Combination]int64) (Stats, bool) {
	var st Stats
	var sum int64
	for _, c := range combos {
		var price int64
		if has, ok := cached[c]; ok {
			if !has {
				continue
			}
			price = prices[c]
		} else {
			var err error
			if price, err = kind.Price(o, q, c); err != nil {
				continue
			}
		}
		if st.Combinations == 0 || price < st.Min {
			st.Min = price
		}
		if st.Combinations == 0 || price > st.Max {
			st.Max = price
		}
		sum += price
		st.Combinations++
	}
	if st.Combinations == 0 {
		return Stats{}, false
	}
	st.Average = float64(sum) / float64(st.Combinations)
	return st, true
}

// encodeMatch is the LogicalResultsData value of a match:
// "handler" or "handler|min|max|average|combinations".
func encodeMatch(m Match) string {
	if m.Prices == nil {
		return m.Handler
	}
	s := m.Prices
	return m.Handler + "|" + strconv.FormatInt(s.Min, 10) + "|" + strconv.FormatInt(s.Max, 10) + "|" +
		strconv.FormatFloat(s.Average, 'g', -1, 64) + "|" + strconv.Itoa(s.Combinations)
}

// decodeMatch is the inverse of encodeMatch.
func decodeMatch(offerID, v string) (Match, error) {
	parts := strings.Split(v, "|")
	m := Match{OfferID: offerID, Handler: parts[0]}
	if len(parts) == 1 {
		return m, nil
	}
	if len(parts) != 5 {
		return Match{}, fmt.Errorf("offer: result value %q of %s: want 1 or 5 fields", v, offerID)
	}
	var s Stats
	var errs [4]error
	s.Min, errs[0] = strconv.ParseInt(parts[1], 10, 64)
	s.Max, errs[1] = strconv.ParseInt(parts[2], 10, 64)
	s.Average, errs[2] = strconv.ParseFloat(parts[3], 64)
	s.Combinations, errs[3] = strconv.Atoi(parts[4])
	for _, err := range errs {
		if err != nil {
			return Match{}, fmt.Errorf("offer: result value %q of %s: %w", v, offerID, err)
		}
	}
	m.Prices = &s
	return m, nil
}
