package offer

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/stream"
)

func TestResultID_sameForReorderedAndDuplicatedElements(t *testing.T) {
	a := aggFilter([]string{"p2", "p1", "p1"}, Element{OrderQuantity: 2, DeliverToLocationIDs: []string{"loc2", "loc1"},
		PaymentMethodIDs: []string{"cash", "card"}, DeliveryMethodIDs: []string{"post"}, Aggregate: AggMin})
	b := aggFilter([]string{"p1", "p2"}, Element{OrderQuantity: 2, DeliverToLocationIDs: []string{"loc1", "loc2"},
		PaymentMethodIDs: []string{"card", "cash"}, DeliveryMethodIDs: []string{"post"}, Aggregate: AggMin})
	b.Elements[0], b.Elements[1] = b.Elements[1], b.Elements[0]
	idA, canonA := ResultID(a)
	idB, canonB := ResultID(b)
	if idA != idB || string(canonA) != string(canonB) || !validResultID(idA) {
		t.Fatalf("ResultID differs for the same filter: %s %s\n%s\n%s", idA, idB, canonA, canonB)
	}
	c := aggFilter([]string{"p1", "p2"}, Element{OrderQuantity: 3, DeliverToLocationIDs: []string{"loc1", "loc2"},
		PaymentMethodIDs: []string{"card", "cash"}, DeliveryMethodIDs: []string{"post"}, Aggregate: AggMin})
	if idC, _ := ResultID(c); idC == idA {
		t.Errorf("a different orderQuantity has the same result id %s", idC)
	}
}

func TestElement_Validate(t *testing.T) {
	good := aggFilter([]string{"p1"}, testAgg)
	many := make([]string, MaxListLength+1)
	for i := range many {
		many[i] = "x" + strings.Repeat("y", i%3)
	}
	tests := []struct {
		name   string
		mutate func(e *Element)
		ok     bool
	}{
		{"valid", func(*Element) {}, true},
		{"root not sellOffer", func(e *Element) { e.FilterType = "orderPrice" }, false},
		{"root not a group", func(e *Element) { e.Type = TypeLogical }, false},
		{"empty group", func(e *Element) { e.Elements = nil }, false},
		{"unknown type", func(e *Element) { e.Elements[0].Type = "or" }, false},
		{"unknown tag", func(e *Element) { e.Elements[0].LogicalTag = "colour" }, false},
		{"too many ids", func(e *Element) { e.Elements[0].ProductIDs = many }, false},
		{"empty id", func(e *Element) { e.Elements[0].ProductIDs = []string{""} }, false},
		{"control character", func(e *Element) { e.Elements[0].ProductIDs = []string{"a\nb"} }, false},
		{"two price elements", func(e *Element) { e.Elements = append(e.Elements, e.Elements[1]) }, false},
		{"bad aggregate", func(e *Element) { e.Elements[1].ComplexFilter.Elements[0].Aggregate = "median" }, false},
		{"zero quantity", func(e *Element) { e.Elements[1].ComplexFilter.Elements[0].OrderQuantity = 0 }, false},
		{"min above max", func(e *Element) {
			e.Elements[1].ComplexFilter.Elements[0].MinPrice, e.Elements[1].ComplexFilter.Elements[0].MaxPrice = ptr(int64(5)), ptr(int64(4))
		}, false},
		{"unknown complexFilter type", func(e *Element) { e.Elements[1].ComplexFilter.FilterType = "sellOfferTermLink" }, false},
		{"too many combinations", func(e *Element) {
			el := &e.Elements[1].ComplexFilter.Elements[0]
			el.DeliverToLocationIDs, el.PaymentMethodIDs, el.DeliveryMethodIDs = many[:40], many[:40], []string{"a"}
		}, false},
		{"too deep", func(e *Element) {
			e.Elements[1].ComplexFilter = &Element{Type: TypeGroup, FilterType: "orderPrice", Elements: []Element{
				{Type: TypeComplexFilter, ComplexFilter: &Element{Type: TypeGroup, FilterType: "orderPrice", Elements: []Element{testAggLogical()}}}}}
		}, false},
		{"combinations without sellOfferId", func(e *Element) { e.Elements[1].ComplexFilter.Elements[0].LogicalTag = TagCombinations }, false},
		{"combinations", func(e *Element) {
			el := &e.Elements[1].ComplexFilter.Elements[0]
			el.LogicalTag, el.SellOfferID, el.Aggregate = TagCombinations, "o1", ""
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := aggFilter([]string{"p1"}, testAgg)
			e.Elements[1].ComplexFilter = &Element{Type: TypeGroup, FilterType: "orderPrice", Elements: []Element{testAggLogical()}}
			tt.mutate(&e)
			err := e.Validate()
			if (err == nil) != tt.ok || err != nil && !errors.Is(err, ErrInvalidFilter) {
				t.Errorf("Validate = %v, want ok %v (ErrInvalidFilter otherwise)", err, tt.ok)
			}
		})
	}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
}

func testAggLogical() Element {
	e := testAgg
	e.Type, e.LogicalTag = TypeLogical, TagAggregated
	return e
}

func TestKind_Price(t *testing.T) {
	o := Offer{ID: "o", Quantity: 50, Locations: []string{"a"}, Delivery: []Method{{"post", 100}}, Payment: []Method{{"card", 10}},
		Plans: []PricePlan{{"p1", 1, 1000}, {"p2", 10, 800}, {"p3", 10, 700}, {"p4", 40, 1200}}}
	tests := []struct {
		kind Kind
		q    int64
		c    Combination
		want int64
		err  error
	}{
		{KindStandard, 1, Combination{"a", "post", "card"}, 1000 + 110, nil},
		{KindStandard, 12, Combination{"a", "post", "card"}, 12*700 + 110, nil},
		{KindStandard, 45, Combination{"a", "post", "card"}, 45*1200 + 110, nil},
		{KindAuction, 12, Combination{"a", "post", "card"}, 12*1000 + 110, nil},
		{KindAuction, 45, Combination{"a", "post", "card"}, 45*1200 + 110, nil},
		{KindStandard, 51, Combination{"a", "post", "card"}, 0, ErrQuantityUnavailable},
		{KindStandard, 0, Combination{"a", "post", "card"}, 0, ErrQuantityUnavailable},
		{KindStandard, 1, Combination{"b", "post", "card"}, 0, ErrLocationNotServed},
		{KindStandard, 1, Combination{"a", "drone", "card"}, 0, ErrDeliveryNotOffered},
		{KindStandard, 1, Combination{"a", "post", "cash"}, 0, ErrPaymentNotOffered},
	}
	for _, tt := range tests {
		got, err := tt.kind.Price(&o, tt.q, tt.c)
		if got != tt.want || !errors.Is(err, tt.err) {
			t.Errorf("%s.Price(%d, %+v) = %d, %v; want %d, %v", tt.kind, tt.q, tt.c, got, err, tt.want, tt.err)
		}
		if want, ok := brutePrice(tt.kind, o, tt.q, tt.c.Location, tt.c.Delivery, tt.c.Payment); ok != (tt.err == nil) || ok && want != got {
			t.Errorf("brute force disagrees: %d, %v", want, ok)
		}
	}
	noPlan := o
	noPlan.Plans = []PricePlan{{"p", 5, 1}}
	if _, err := KindStandard.Price(&noPlan, 2, Combination{"a", "post", "card"}); !errors.Is(err, ErrNoPricePlan) {
		t.Errorf("no plan for 2 units: %v, want ErrNoPricePlan", err)
	}
}

// The compiled program agrees with brute force over many offers, filters
// and every aggregate.
func TestProgram_aggregatesMatchBruteForce(t *testing.T) {
	handlers := DefaultHandlers
	offers := SampleOffers(11, 3000, 30, handlers)
	kinds := map[string]Kind{}
	for _, h := range handlers {
		kinds[h.Tag] = h.Kind
	}
	for _, agg := range []string{AggMin, AggMax, AggAverage} {
		for _, q := range []int64{1, 5, 20} {
			el := Element{OrderQuantity: q, DeliverToLocationIDs: SampleLocations[:5], PaymentMethodIDs: SamplePayment,
				DeliveryMethodIDs: SampleDelivery[:2], Aggregate: agg, MinPrice: ptr(int64(2000)), MaxPrice: ptr(int64(90000))}
			filter := aggFilter([]string{"p1", "p3", "p7", "p9"}, el)
			if err := filter.Validate(); err != nil {
				t.Fatal(err)
			}
			prog := compile(filter)
			var got []Match
			for i := range offers {
				if m, _, ok := prog.eval(&offers[i], kinds[offers[i].Handler]); ok {
					got = append(got, m)
				}
			}
			want := bruteSearch(offers, handlers, []string{"p1", "p3", "p7", "p9"}, nil, &el)
			if len(want) == 0 {
				t.Fatalf("%s q=%d: no brute-force match; fixture too small", agg, q)
			}
			sameMatches(t, got, want)
		}
	}
}

func TestMatch_encodeDecodeRoundTrip(t *testing.T) {
	for _, m := range []Match{{OfferID: "o1", Handler: "standard"},
		{OfferID: "o2", Handler: "auction", Prices: &Stats{Min: 1, Max: 99, Average: 33.333333333333336, Combinations: 3}}} {
		got, err := decodeMatch(m.OfferID, encodeMatch(m))
		if err != nil || got.Handler != m.Handler || (got.Prices == nil) != (m.Prices == nil) || got.Prices != nil && *got.Prices != *m.Prices {
			t.Errorf("round trip of %+v = %+v, %v", m, got, err)
		}
	}
	if _, err := decodeMatch("o", "h|1|2"); err == nil {
		t.Error("decodeMatch accepted 3 fields")
	}
}

func TestConfig_Validate(t *testing.T) {
	if err := (Config{}).WithDefaults().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for name, c := range map[string]Config{
		"duplicate handler": {Handlers: []HandlerSpec{{"a", KindStandard}, {"a", KindAuction}}},
		"bad kind":          {Handlers: []HandlerSpec{{"a", "barter"}}},
		"bad tag":           {Handlers: []HandlerSpec{{"A b", KindStandard}}},
		"partitions":        {Partitions: -1},
		"ttl":               {ResultTTL: -time.Second},
	} {
		if err := c.WithDefaults().Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, c)
		}
	}
}

func TestConfig_handlerStagesTakeOverWithinTheProcessingTimeout(t *testing.T) {
	def := Config{}.WithDefaults()
	if err := def.Validate(); err != nil {
		t.Fatalf("defaults refused: %v", err)
	}
	late := Config{ProcessingTimeout: time.Minute, Runner: stream.RunnerConfig{ClaimIdle: 2 * time.Minute}}.WithDefaults()
	if err := late.Validate(); !errors.Is(err, stream.ErrDeadlineConflict) {
		t.Errorf("Validate with a claim idle beyond the processing timeout = %v, want a deadline conflict", err)
	}
}
