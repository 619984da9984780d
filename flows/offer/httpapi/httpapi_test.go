package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/api/apitest"
	"github.com/dropstream/dropstream/flows/offer"
	"github.com/dropstream/dropstream/flows/offer/httpapi"
	"github.com/dropstream/dropstream/internal/tenancy"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier/subscriber"
	"github.com/dropstream/dropstream/stream"
)

// The notifier subscribers the test server knows: one of the write key's
// tenant, one of the read key's.
const (
	writersSubscriber = "s_0123456789abcdef0123456789ab"
	readersSubscriber = "s_0123456789abcdef0123456789ac"
)

// subscriberOf is the test server's lookup of subscribers
// (offer.Config.Subscriber), over writersSubscriber and
// readersSubscriber.
func subscriberOf(_ context.Context, v tenancy.View, id string) error {
	owner := map[string]string{writersSubscriber: "writers", readersSubscriber: "readers"}[id]
	if owner == "" || !v.Sees(owner) {
		return fmt.Errorf("%w: %s", subscriber.ErrNotFound, id)
	}
	return nil
}

// offerServer serves the offer routes over a real Redis with the handler
// stages running unless stopped is set; read key "r" (tenant readers),
// write key "w" (tenant writers).
func offerServer(t *testing.T, maxWait time.Duration, running bool) *api.Server {
	t.Helper()
	rdb, err := stream.Dial(context.Background(), testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	tel := stream.Telemetry{Logger: slog.New(slog.DiscardHandler)}
	svc, err := offer.NewWith(context.Background(), rdb, offer.Config{Partitions: 2, MaxWait: maxWait, MaxStandingPerCaller: 3,
		Runner: stream.RunnerConfig{Block: 20 * time.Millisecond}, Subscriber: subscriberOf}, tel)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	if running {
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		t.Cleanup(func() { cancel(); wg.Wait() })
		for _, st := range svc.Stages() {
			r, err := stream.NewRunner(rdb, st, tel)
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() { _ = r.Run(ctx) })
		}
		wg.Go(func() { _ = svc.RunFresh(ctx) })
	}
	srv, _ := apitest.NewServer(t, api.Config{APIKeys: "r:read:tenant=readers;w:write:tenant=writers"})
	httpapi.Register(srv, svc)
	return srv
}

const offerJSON = `{"offerId":"o1","handler":"standard","productId":"p1","sellerId":"s1","quantity":10,
	"pricePlans":[{"planId":"a","minQuantity":1,"unitPrice":500},{"planId":"b","minQuantity":5,"unitPrice":400}],
	"deliveryMethods":[{"id":"post","cost":50}],"paymentMethods":[{"id":"card","cost":7},{"id":"cash","cost":0}],
	"locations":["l1","l2"]}`

const searchJSON = `{"requestId":"req-1","filter":{"filterType":"sellOffer","type":"group","elements":[
	{"type":"logical","logicalTag":"product","productIds":["p1"]},
	{"type":"complexFilter","complexFilter":{"filterType":"orderPrice","type":"group","elements":[
		{"type":"logical","logicalTag":"aggregatedSellOfferPrices","orderQuantity":5,"deliverToLocationIds":["l1","l9"],
		 "paymentMethodIds":["card","cash"],"deliveryMethodIds":["post"],"aggregate":"minPrice"}]}}]}}`

func TestOfferRoutes_offersSearchResultsAndOrderPrice(t *testing.T) {
	srv := offerServer(t, 10*time.Second, true)
	var o offer.Offer
	if code := call(t, srv, "POST", "/v1/offers", "w", offerJSON, &o); code != http.StatusCreated || o.ID != "o1" {
		t.Fatalf("create = %d %+v", code, o)
	}
	if code := call(t, srv, "POST", "/v1/offers", "w", offerJSON, &o); code != http.StatusOK {
		t.Fatalf("replace = %d, want 200", code)
	}
	auction := strings.NewReplacer(`"o1"`, `"o2"`, `"standard"`, `"auction"`).Replace(offerJSON)
	if code := call(t, srv, "POST", "/v1/offers", "w", auction, &o); code != http.StatusCreated {
		t.Fatalf("create o2 = %d", code)
	}
	for _, tc := range []struct {
		name, method, path, key, body string
		want                          int
		code                          string
	}{
		{"read key cannot write", "POST", "/v1/offers", "r", offerJSON, http.StatusForbidden, "forbidden"},
		{"unknown handler", "POST", "/v1/offers", "w", strings.Replace(offerJSON, `"standard"`, `"barter"`, 1), 422, "invalid_offer"},
		{"no plans", "POST", "/v1/offers", "w", strings.Replace(offerJSON, `"pricePlans":[`, `"pricePlans":[],"x":[`, 1), 400, "invalid_json"},
		{"negative cost", "POST", "/v1/offers", "w", strings.Replace(offerJSON, `"cost":50`, `"cost":-1`, 1), 422, "invalid_offer"},
		{"bad filter", "POST", "/v1/offers/search", "r", `{"filter":{"type":"group","filterType":"sellOffer","elements":[]}}`, 422, "invalid_filter"},
		{"bad aggregate", "POST", "/v1/offers/search", "r", strings.Replace(searchJSON, "minPrice", "median", 1), 422, "invalid_filter"},
		{"unknown result", "GET", "/v1/offers/results/00000000000000000000000000000000", "r", "", 404, "result_not_found"},
		{"bad limit", "GET", "/v1/offers/results/00000000000000000000000000000000?limit=5000", "r", "", 400, "invalid_limit"},
		{"unknown offer", "GET", "/v1/offers/nope", "r", "", 404, "offer_not_found"},
		{"bad order", "POST", "/v1/offers/order-price", "r", `{"sellOfferQuantities":[]}`, 422, "invalid_order"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e envelopeOut
			if code := call(t, srv, tc.method, tc.path, tc.key, tc.body, &e); code != tc.want || e.Error.Code != tc.code {
				t.Errorf("%s %s = %d %+v, want %d %s", tc.method, tc.path, code, e, tc.want, tc.code)
			}
		})
	}

	var first, second offer.SearchResponse
	if code := call(t, srv, "POST", "/v1/offers/search", "r", searchJSON, &first); code != 200 || first.Outcome != "miss" || first.Status != "complete" {
		t.Fatalf("search = %d %+v", code, first)
	}
	// o1 (standard): 5 × 400 + 50 + cash 0 = 2050 at the cheapest; o2
	// (auction, highest bid 500): 5 × 500 + 50 = 2550. l9 is not served.
	if first.Total != 2 || first.Matches[0].OfferID != "o1" || first.Matches[0].Prices.Min != 2050 || first.Matches[0].Prices.Max != 2057 ||
		first.Matches[1].OfferID != "o2" || first.Matches[1].Prices.Min != 2550 || first.Matches[1].Prices.Combinations != 2 {
		raw, _ := json.Marshal(first)
		t.Fatalf("search matches %s", raw)
	}
	other := strings.Replace(searchJSON, "req-1", "req-2", 1)
	if code := call(t, srv, "POST", "/v1/offers/search", "r", other, &second); code != 200 || second.Outcome != "hit" || second.ResultID != first.ResultID {
		t.Fatalf("second search = %d %+v, want a hit on %s", code, second, first.ResultID)
	}
	var res offer.Result
	if code := call(t, srv, "GET", "/v1/offers/results/"+first.ResultID+"?offset=1&limit=1", "r", "", &res); code != 200 ||
		res.Status != "complete" || len(res.Matches) != 1 || res.Matches[0].OfferID != "o2" {
		t.Fatalf("result page = %d %+v", code, res)
	}
	var op offer.OrderPrice
	order := `{"sellOfferQuantities":[{"offerId":"o1","quantity":2}],"deliverToLocationId":"l2","deliveryMethodId":"post","paymentMethodId":"card"}`
	if code := call(t, srv, "POST", "/v1/offers/order-price", "r", order, &op); code != 200 || op.Status != "complete" || op.Price != 1057 || op.Cached {
		t.Fatalf("order price = %d %+v", code, op)
	}
	if code := call(t, srv, "POST", "/v1/offers/order-price", "r", strings.Replace(order, "l2", "l7", 1), &op); code != 200 ||
		op.Status != "error" || op.Error != "location_not_served" {
		t.Fatalf("order price elsewhere = %d %+v", code, op)
	}
	var page struct {
		Items  []offer.Offer
		Cached bool
	}
	if code := call(t, srv, "GET", "/v1/offers?productId=p1", "r", "", &page); code != 200 || len(page.Items) != 2 || page.Cached {
		t.Fatalf("offers of p1 = %d %+v", code, page)
	}
	if code := call(t, srv, "GET", "/v1/offers?productId=p1", "r", "", &page); code != 200 || len(page.Items) != 2 || !page.Cached {
		t.Fatalf("offers of p1 again = %d %+v, want from the TranslateIds cache", code, page)
	}
	if code := call(t, srv, "DELETE", "/v1/offers/o2", "w", "", nil); code != http.StatusNoContent {
		t.Fatalf("delete = %d", code)
	}
	if code := call(t, srv, "GET", "/v1/offers", "r", "", &page); code != 200 || len(page.Items) != 1 || page.Items[0].ID != "o1" {
		t.Fatalf("list after delete = %d %+v", code, page)
	}
}

func TestOfferRoutes_searchAnswers202WhenHandlersAreSlow(t *testing.T) {
	srv := offerServer(t, 30*time.Millisecond, false)
	var resp offer.SearchResponse
	res := apitest.Request(t, srv, "POST", "/v1/offers/search", searchJSON, api.HeaderAPIKey, "r")
	res.JSON(t, &resp)
	if res.Status != http.StatusAccepted || resp.Status != "processing" || resp.ResultID == "" ||
		res.Header.Get("Location") != "/v1/offers/results/"+resp.ResultID {
		t.Fatalf("search without handlers = %d %+v location %q; want 202 processing with the result's location",
			res.Status, resp, res.Header.Get("Location"))
	}
	var r offer.Result
	if code := call(t, srv, "GET", "/v1/offers/results/"+resp.ResultID, "r", "", &r); code != 200 || r.Status != "processing" || r.Waiting != 3 {
		t.Errorf("result = %d %+v, want processing with 3 waiting handlers", code, r)
	}
	var doc map[string]any
	if code := call(t, srv, "GET", "/openapi.json", "", "", &doc); code != 200 {
		t.Fatalf("openapi = %d", code)
	}
	paths, _ := doc["paths"].(map[string]any)
	for _, p := range []string{"/v1/offers", "/v1/offers/{id}", "/v1/offers/search", "/v1/offers/results/{id}", "/v1/offers/order-price"} {
		if _, ok := paths[p]; !ok {
			t.Errorf("/openapi.json lacks %s", p)
		}
	}
}

// call sends a request with an API key and decodes a JSON answer into out.
func call(t *testing.T, srv *api.Server, method, path, key, body string, out any) int {
	t.Helper()
	var b any
	if body != "" {
		b = body
	}
	res := apitest.Request(t, srv, method, path, b, api.HeaderAPIKey, key)
	if out != nil && len(res.Body) > 0 {
		res.JSON(t, out)
	}
	return res.Status
}

type envelopeOut struct {
	Error struct{ Code, Message string } `json:"error"`
}
