package offer

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Match is one offer of a result.
type Match struct {
	OfferID string `json:"offerId"`
	Handler string `json:"handler"`
	Prices  *Stats `json:"prices,omitempty"` // nil without a price element
}

// program is a compiled filter: a conjunction of predicates and at most
// one price element.
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

// eval returns the offer's match and its ordering score, or false when the
// offer does not match.
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
