package offer

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/dropstream/dropstream/internal/testenv"
)

func TestCatalog_putMoveDeleteKeepIndexAndViewsInStep(t *testing.T) {
	for _, b := range testenv.WithCluster() {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			rdb := b.Client(t)
			s := newService(t, rdb, testConfig(newClock()))
			c := s.Catalog()
			offers := SampleOffers(5, 50, 5, s.cfg.Handlers)
			created, err := c.Put(ctx, offers...)
			if err != nil || len(created) != 50 || slices.Contains(created, false) {
				t.Fatalf("Put = %v, %v; want 50 created", created, err)
			}
			std, auc := s.views["standard"], s.views["auction"]
			count := func(v *view) int {
				v.mu.Lock()
				defer v.mu.Unlock()
				if err := v.sync(ctx); err != nil {
					t.Fatal(err)
				}
				return len(v.offers)
			}
			if n := count(std); n != 17 {
				t.Fatalf("standard view holds %d offers, want 17 (round robin over 3 handlers)", n)
			}
			// o0 moves from standard to auction.
			moved := offers[0]
			moved.Handler, moved.Quantity = "auction", 99
			if created, err := c.Put(ctx, moved); err != nil || created[0] {
				t.Fatalf("Put(moved) = %v, %v; want replaced", created, err)
			}
			if h, err := c.Handler(ctx, "o0"); err != nil || h != "auction" {
				t.Fatalf("index says %q, %v; want auction", h, err)
			}
			if n := count(std); n != 16 {
				t.Errorf("standard view holds %d after the move, want 16", n)
			}
			if n := count(auc); n != 18 {
				t.Errorf("auction view holds %d after the move, want 18", n)
			}
			auc.mu.Lock()
			q := auc.offers[auc.pos["o0"]].Quantity
			auc.mu.Unlock()
			if q != 99 {
				t.Errorf("auction view has quantity %d for o0, want 99", q)
			}
			// o3 (standard) changes product: the view's product index follows.
			changed := offers[3]
			changed.ProductID = "p-new"
			if _, err := c.Put(ctx, changed); err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				product string
				want    bool
			}{{"p-new", true}, {offers[3].ProductID, false}} {
				prog := compile(Element{Type: TypeGroup, FilterType: "sellOffer", Elements: []Element{{Type: TypeLogical, LogicalTag: TagProduct, ProductIDs: []string{tc.product}}}})
				found, err := std.evaluate(ctx, &prog, KindStandard)
				if err != nil {
					t.Fatal(err)
				}
				has := slices.ContainsFunc(found, func(s scored) bool { return s.match.OfferID == "o3" })
				if has != tc.want {
					t.Errorf("standard view finds o3 under product %s: %v, want %v", tc.product, has, tc.want)
				}
			}
			if got, err := c.Get(ctx, "o0"); err != nil || got.Handler != "auction" || got.Quantity != 99 {
				t.Errorf("Get(o0) = %+v, %v", got, err)
			}
			if err := c.Delete(ctx, "o0"); err != nil {
				t.Fatal(err)
			}
			if err := c.Delete(ctx, "o0"); !errors.Is(err, ErrNotFound) {
				t.Errorf("second Delete = %v, want ErrNotFound", err)
			}
			if _, err := c.Get(ctx, "o0"); !errors.Is(err, ErrNotFound) {
				t.Errorf("Get after Delete = %v, want ErrNotFound", err)
			}
			if n := count(auc); n != 17 {
				t.Errorf("auction view holds %d after the delete, want 17", n)
			}
			var all []Offer
			for cursor := ""; ; {
				page, next, err := c.List(ctx, cursor, 7)
				if err != nil {
					t.Fatal(err)
				}
				if len(page) > 7 || (next != "" && len(page) != 7) {
					t.Fatalf("a page of limit 7 holds %d offers (next %q)", len(page), next)
				}
				all = append(all, page...)
				if cursor = next; cursor == "" {
					break
				}
			}
			ids := map[string]bool{}
			for _, o := range all {
				ids[o.ID] = true
			}
			if len(all) != len(ids) {
				t.Errorf("List gave %d offers, %d distinct: each must come once", len(all), len(ids))
			}
			if len(ids) != 49 || ids["o0"] {
				t.Errorf("List found %d distinct offers (o0: %v), want 49 without o0", len(ids), ids["o0"])
			}
			bad := offers[1]
			bad.Handler = "barter"
			if _, err := c.Put(ctx, bad); !errors.Is(err, ErrInvalidOffer) {
				t.Errorf("Put with an unknown handler = %v, want ErrInvalidOffer", err)
			}
		})
	}
}

func TestView_reloadsWhenTheChangeStreamWasTrimmed(t *testing.T) {
	ctx := context.Background()
	rdb := testenv.Backends()[0].Client(t)
	cfg := testConfig(newClock())
	cfg.ChangeLogLength = 100
	s := newService(t, rdb, cfg)
	offers := SampleOffers(9, 30, 5, []HandlerSpec{{"standard", KindStandard}})
	if _, err := s.Catalog().Put(ctx, offers...); err != nil {
		t.Fatal(err)
	}
	v := s.views["standard"]
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.sync(ctx); err != nil || len(v.offers) != 30 {
		t.Fatalf("first sync: %d offers, %v", len(v.offers), err)
	}
	// 500 more changes, and the stream is cut to its last 10 entries.
	more := SampleOffers(10, 500, 5, []HandlerSpec{{"standard", KindStandard}})
	for i := range more {
		more[i].ID = "m" + more[i].ID
	}
	if _, err := s.Catalog().Put(ctx, more...); err != nil {
		t.Fatal(err)
	}
	if err := rdb.XTrimMaxLen(ctx, changesKey("standard"), 10).Err(); err != nil {
		t.Fatal(err)
	}
	if err := v.sync(ctx); err != nil || len(v.offers) != 530 || v.version != 530 {
		t.Fatalf("sync after trim: %d offers at version %d, %v; want 530 at 530", len(v.offers), v.version, err)
	}
}

func TestCatalog_translateIdsCacheHitMissAndInvalidation(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			rdb := b.Client(t)
			s := newService(t, rdb, testConfig(newClock()))
			c := s.Catalog()
			offers := SampleOffers(2, 200, 10, s.cfg.Handlers)
			if _, err := c.Put(ctx, offers...); err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, o := range offers {
				if o.ProductID == "p3" {
					want = append(want, o.ID)
				}
			}
			slices.Sort(want)
			for i, wantCached := range []bool{false, true} {
				ids, cached, err := c.Translate(ctx, FromProduct, "p3", ToSellOffer)
				if err != nil || cached != wantCached || !slices.Equal(ids, want) {
					t.Fatalf("Translate #%d = %v cached %v, %v; want %v cached %v", i+1, ids, cached, err, want, wantCached)
				}
			}
			ttl, err := rdb.PTTL(ctx, catalogKey("translate", FromProduct+"_p3_"+ToSellOffer)).Result()
			if err != nil || ttl <= 0 || ttl > s.cfg.TranslateTTL {
				t.Errorf("translate record TTL %s, %v; want (0, %s]", ttl, err, s.cfg.TranslateTTL)
			}
			extra := offers[0]
			extra.ID, extra.ProductID = "new-offer", "p3"
			if _, err := c.Put(ctx, extra); err != nil {
				t.Fatal(err)
			}
			ids, cached, err := c.Translate(ctx, FromProduct, "p3", ToSellOffer)
			if err != nil || cached || !slices.Contains(ids, "new-offer") || len(ids) != len(want)+1 {
				t.Fatalf("Translate after a put = %v cached %v, %v; want recomputed with new-offer", ids, cached, err)
			}
			if _, _, err := c.Translate(ctx, "colour", "red", ToSellOffer); !errors.Is(err, ErrInvalidOffer) {
				t.Errorf("unknown type: %v", err)
			}
		})
	}
}

func TestOrderPrice_completeErrorAndCache(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			clk := newClock()
			rdb := b.Client(t)
			cfg := testConfig(clk)
			cfg.OrderPriceTTL = time.Minute
			s := newService(t, rdb, cfg)
			o1 := Offer{ID: "a", Handler: "standard", ProductID: "p", SellerID: "s", Quantity: 10, Locations: []string{"l"},
				Plans: []PricePlan{{"x", 1, 500}, {"y", 5, 400}}, Delivery: []Method{{"post", 50}}, Payment: []Method{{"card", 7}}}
			o2 := Offer{ID: "b", Handler: "auction", ProductID: "p", SellerID: "s", Quantity: 3, Locations: []string{"l"},
				Plans: []PricePlan{{"x", 1, 900}, {"y", 2, 1000}}, Delivery: []Method{{"post", 20}}, Payment: []Method{{"card", 1}, {"cash", 0}}}
			if _, err := s.Catalog().Put(ctx, o1, o2); err != nil {
				t.Fatal(err)
			}
			req := OrderPriceRequest{Quantities: []OfferQuantity{{"b", 2}, {"a", 6}}, Location: "l", Delivery: "post", Payment: "card"}
			wantPrice := int64(6*400+57) + int64(2*1000+21)
			for i, wantCached := range []bool{false, true} {
				op, err := s.OrderPrice(ctx, req)
				if err != nil || op.Status != PriceComplete || op.Price != wantPrice || op.Cached != wantCached {
					t.Fatalf("OrderPrice #%d = %+v, %v; want complete %d cached %v", i+1, op, err, wantPrice, wantCached)
				}
			}
			swapped := req
			swapped.Quantities = []OfferQuantity{{"a", 6}, {"b", 2}}
			id1, _ := OrderPriceID(req)
			id2, _ := OrderPriceID(swapped)
			if id1 != id2 {
				t.Errorf("order price id depends on line order: %s %s", id1, id2)
			}
			cash := req
			cash.Payment = "cash" // offer a does not take cash
			for i, wantCached := range []bool{false, true} {
				op, err := s.OrderPrice(ctx, cash)
				if err != nil || op.Status != PriceError || op.Error != ErrPaymentNotOffered.Error() || op.Cached != wantCached {
					t.Fatalf("OrderPrice(cash) #%d = %+v, %v; want error payment_method_not_offered cached %v", i+1, op, err, wantCached)
				}
			}
			missing := req
			missing.Quantities = []OfferQuantity{{"zzz", 1}}
			if op, err := s.OrderPrice(ctx, missing); err != nil || op.Status != PriceError || op.Error != ErrOfferNotFound.Error() {
				t.Errorf("OrderPrice(missing offer) = %+v, %v", op, err)
			}
			clk.advance(61 * time.Second)
			if op, err := s.OrderPrice(ctx, req); err != nil || op.Cached || op.Price != wantPrice {
				t.Errorf("OrderPrice after expiry = %+v, %v; want recomputed", op, err)
			}
			for _, bad := range []OrderPriceRequest{{}, {Quantities: []OfferQuantity{{"a", 0}}, Location: "l", Delivery: "post", Payment: "card"},
				{Quantities: []OfferQuantity{{"a", 1}, {"a", 2}}, Location: "l", Delivery: "post", Payment: "card"}} {
				if _, err := s.OrderPrice(ctx, bad); !errors.Is(err, ErrInvalidFilter) {
					t.Errorf("OrderPrice(%+v) = %v, want ErrInvalidFilter", bad, err)
				}
			}
		})
	}
}
