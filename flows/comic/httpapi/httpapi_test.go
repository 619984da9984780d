package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/api/apitest"
	"github.com/dropstream/dropstream/flows/comic"
	"github.com/dropstream/dropstream/flows/comic/httpapi"
	"github.com/dropstream/dropstream/internal/tenancy"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// payments accepts every charge and records refunds.
type payments struct {
	mu       sync.Mutex
	refunded []string
}

func (p *payments) Charge(context.Context, string, string, int64) error { return nil }
func (p *payments) Refund(_ context.Context, txn, _ string, _ int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refunded = append(p.refunded, txn)
	return nil
}

func newServer(t *testing.T, withSales bool) (*api.Server, *comic.Flow, redis.UniversalClient) {
	t.Helper()
	rdb := testenv.Dial(t, testenv.RedisURL(t))
	var p comic.Payments
	if withSales {
		p = &payments{}
	}
	svc, err := comic.NewWith(rdb, comic.Config{Partitions: 2}, p, stream.Telemetry{})
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := apitest.NewServer(t, api.Config{APIKeys: "r:read:tenant=shop;w:write:tenant=shop"})
	httpapi.Register(srv, svc)
	return srv, svc, rdb
}

// call runs a request with the write key (the read key for GET) and
// decodes the JSON answer into out.
func call(t *testing.T, srv *api.Server, method, path, body string, out any) int {
	t.Helper()
	key := "w"
	if method == http.MethodGet {
		key = "r"
	}
	var b any
	if body != "" {
		b = body
	}
	res := apitest.Request(t, srv, method, path, b, api.HeaderAPIKey, key)
	if out != nil {
		res.JSON(t, out)
	}
	return res.Status
}

type errBody struct {
	Error struct{ Code, Message string } `json:"error"`
}

const spidey = `{"publisher":"Marvel","series":"The Amazing Spider-Man","title":"The Night Gwen Stacy Died",
"issue":"121","year":1973,"grade":9.4,"key_issue":true,"price_cents":250000}`

func TestRoutes_comicsAndSubscriptionsOnBothPaths(t *testing.T) {
	srv, svc, _ := newServer(t, true)
	var schema map[string]any
	if code := call(t, srv, "GET", "/v1/schemas/comic.json", "", &schema); code != 200 || schema["$id"] != comic.SchemaID {
		t.Fatalf("schema: %d %v", code, schema["$id"])
	}
	for _, path := range []string{"/v1/comics", "/comics"} {
		var e errBody
		code := call(t, srv, "POST", path, strings.Replace(spidey, `"grade":9.4`, `"grade":9.3`, 1), &e)
		if code != 422 || e.Error.Code != "invalid_comic" || !strings.Contains(e.Error.Message, "grade") {
			t.Errorf("POST %s with a bad grade: %d %+v, want 422 naming grade", path, code, e)
		}
		code = call(t, srv, "POST", path, strings.Replace(spidey, `"year"`, `"yr"`, 1), &e)
		if code != 422 || !strings.Contains(e.Error.Message, "yr") {
			t.Errorf("POST %s with an unknown field: %d %+v, want 422 naming yr", path, code, e)
		}
	}
	var created struct {
		ID      string `json:"id"`
		Created bool   `json:"created"`
	}
	if code := call(t, srv, "POST", "/comics", spidey, &created); code != 201 || !created.Created || len(created.ID) != 32 {
		t.Fatalf("POST /comics: %d %+v", code, created)
	}
	if code := call(t, srv, "POST", "/v1/comics", spidey, &created); code != 200 || created.Created {
		t.Errorf("POST /v1/comics again: %d %+v, want 200 and created false", code, created)
	}
	var detail struct {
		Status comic.Status `json:"status"`
	}
	if code := call(t, srv, "GET", "/v1/comics/"+created.ID, "", &detail); code != 200 || !detail.Status.InInventory || detail.Status.Gen != 1 {
		t.Errorf("GET comic: %d %+v", code, detail)
	}

	sub := `{"email":"mj@example.com","body":{"series":"The Amazing Spider-Man"}}`
	var s comic.Subscription
	if code := call(t, srv, "POST", "/subscriptions", sub, &s); code != 201 || s.Pattern != "series" {
		t.Fatalf("POST /subscriptions: %d %+v", code, s)
	}
	var e errBody
	if code := call(t, srv, "POST", "/v1/subscriptions", sub, &e); code != 409 || e.Error.Code != "duplicate_subscription" {
		t.Errorf("duplicate POST /v1/subscriptions: %d %+v, want 409", code, e)
	}
	if code := call(t, srv, "POST", "/v1/subscriptions", `{"email":"mj@example.com","body":{"grade":"mint"}}`, &e); code != 422 ||
		!strings.Contains(e.Error.Message, "body.grade") {
		t.Errorf("invalid body: %d %+v, want 422 naming body.grade", code, e)
	}
	var page struct{ Items []comic.Subscription }
	if code := call(t, srv, "GET", "/v1/subscriptions?email=MJ@example.com", "", &page); code != 200 || len(page.Items) != 1 {
		t.Errorf("GET subscriptions: %d %+v", code, page)
	}
	var stats comic.Stats
	if code := call(t, srv, "GET", "/v1/comics/patterns/stats", "", &stats); code != 200 || stats.Subscriptions != 1 {
		t.Errorf("stats: %d %+v", code, stats)
	}
	if code := call(t, srv, "DELETE", "/v1/subscriptions/"+s.ID, "", nil); code != 204 {
		t.Errorf("DELETE: %d", code)
	}
	if code := call(t, srv, "DELETE", "/v1/subscriptions/"+s.ID, "", nil); code != 404 {
		t.Errorf("DELETE again: %d, want 404", code)
	}

	// Purchase on both paths: the first buys, the second finds it gone.
	var receipt comic.Receipt
	buy := `{"email":"peter@example.com","comic":"` + created.ID + `","payment":"card-1"}`
	if code := call(t, srv, "POST", "/completetransaction", buy, &receipt); code != 200 || receipt.PriceCents != 250000 {
		t.Fatalf("POST /completetransaction: %d %+v", code, receipt)
	}
	other := `{"email":"gwen@example.com","comic":` + spidey + `,"payment":"card-2"}`
	if code := call(t, srv, "POST", "/v1/completetransaction", other, &e); code != 409 || e.Error.Code != "sold_out" || e.Error.Message != comic.SorryMessage {
		t.Errorf("second buyer: %d %+v, want 409 sold_out with the sorry message", code, e)
	}
	if _, err := svc.Inventory.Get(context.Background(), created.ID); err == nil {
		t.Error("sold comic still in inventory")
	}
}

func TestRoutes_everyRouteIsInTheOpenAPIDocument(t *testing.T) {
	srv, _, _ := newServer(t, false)
	paths := srv.OpenAPI().Paths
	for _, p := range []string{"/v1/schemas/comic.json", "/v1/comics", "/comics", "/v1/comics/{id}", "/v1/comics/patterns/stats",
		"/v1/subscriptions", "/subscriptions", "/v1/subscriptions/{id}", "/v1/completetransaction", "/completetransaction"} {
		if paths.Value(p) == nil {
			t.Errorf("%s missing from /openapi.json", p)
		}
	}
	var e errBody
	if code := call(t, srv, "POST", "/completetransaction", `{"email":"a@example.com","comic":"x","payment":"p"}`, &e); code != 501 {
		t.Errorf("purchase without payments: %d %+v, want 501", code, e)
	}
}

// TestRoutes_storeFailureIs5xxAndWritesNothing: POST /v1/comics answers 5xx
// only when the store fails, and then nothing of the comic is written.
func TestRoutes_storeFailureIs5xxAndWritesNothing(t *testing.T) {
	srv, svc, rdb := newServer(t, false)
	c, err := comic.ParseComic([]byte(spidey))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// The comic's jobs stream key holds a string: its job cannot be queued.
	jobs := svc.Topics().Jobs.Stream(svc.Topics().Jobs.Partition(c.ID()))
	if err := rdb.Set(ctx, jobs, "not a stream", 0).Err(); err != nil {
		t.Fatal(err)
	}
	var e errBody
	if code := call(t, srv, "POST", "/v1/comics", spidey, &e); code < 500 || e.Error.Code == "" {
		t.Fatalf("POST /v1/comics over a failing store: %d %+v, want 5xx with an error body", code, e)
	}
	if code := call(t, srv, "GET", "/v1/comics/"+c.ID(), "", &e); code != 404 {
		t.Errorf("GET the comic after the failed intake: %d, want 404 (nothing written)", code)
	}
	if err := rdb.Del(ctx, jobs).Err(); err != nil {
		t.Fatal(err)
	}
	var created struct {
		Created bool `json:"created"`
	}
	if code := call(t, srv, "POST", "/comics", spidey, &created); code != 201 || !created.Created {
		t.Errorf("POST /comics once the store works: %d %+v, want 201", code, created)
	}
}

// A notify_url whose host is a denied address is refused with 422 and no
// subscription is stored.
func TestRoutes_notifyURLOnADeniedAddressRefused(t *testing.T) {
	srv, svc, _ := newServer(t, false)
	for _, u := range []string{"http://127.0.0.1:9000/notify", "http://169.254.169.254/latest/meta-data/", "http://[::ffff:127.0.0.1]/n",
		"https://172.20.0.4/notify", "http://[fe80::1]/n"} {
		var e errBody
		body := `{"email":"mj@example.com","body":{"series":"The Amazing Spider-Man"},"notify_url":"` + u + `"}`
		if code := call(t, srv, "POST", "/v1/subscriptions", body, &e); code != 422 || e.Error.Code != "invalid_subscription" ||
			!strings.Contains(e.Error.Message, "notify_url") || !strings.Contains(e.Error.Message, "denied") {
			t.Errorf("POST a subscription notifying %s: %d %+v, want 422 naming notify_url", u, code, e)
		}
	}
	if subs, err := svc.Subscriptions.ByEmailIn(context.Background(), tenancy.View{All: true}, "mj@example.com"); err != nil || len(subs) != 0 {
		t.Errorf("stored %d subscriptions (%v), want none", len(subs), err)
	}
	var s comic.Subscription
	body := `{"email":"mj@example.com","body":{"series":"The Amazing Spider-Man"},"notify_url":"https://93.184.216.34/notify"}`
	if code := call(t, srv, "POST", "/v1/subscriptions", body, &s); code != 201 {
		t.Errorf("a public notify_url: %d, want 201", code)
	}
}

func TestRoutes_subscriptionsCappedPerKey(t *testing.T) {
	rdb := testenv.Dial(t, testenv.RedisURL(t))
	svc, err := comic.NewWith(rdb, comic.Config{Partitions: 2, MaxSubscriptionsPerCaller: 2}, nil, stream.Telemetry{})
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := apitest.NewServer(t, api.Config{APIKeys: "w:write;w2:write"})
	httpapi.Register(srv, svc)
	apitest.CheckCap(t, srv, apitest.Cap{Max: 2, Key: "w", OtherKey: "w2",
		Create: func(i int) (string, string, any) {
			return "POST", "/v1/subscriptions", fmt.Sprintf(`{"email":"reader%d@example.com","body":{}}`, i)
		},
		ID:     func(t testing.TB, r apitest.Response) string { var s comic.Subscription; r.JSON(t, &s); return s.ID },
		Delete: func(id string) string { return "/v1/subscriptions/" + id },
	})
}

// TestRoutes_holdActiveIs409WithItsEnd: a listing with its own hold of
// 600s is told to its subscriber; a buyer without the token gets 409
// hold_active with Retry-After, the timeline shows the hold and its wave,
// and the holder's token buys.
func TestRoutes_holdActiveIs409WithItsEnd(t *testing.T) {
	srv, svc, rdb := newServer(t, true)
	ctx := context.Background()
	var eb errBody
	if code := call(t, srv, "POST", "/v1/comics?hold_seconds=0", spidey, &eb); code != 422 || eb.Error.Code != "invalid_comic" {
		t.Fatalf("hold_seconds=0: %d %+v, want 422 invalid_comic", code, eb)
	}
	var l comic.Listing
	if code := call(t, srv, "POST", "/v1/comics?hold_seconds=600", spidey, &l); code != 201 {
		t.Fatalf("list: %d", code)
	}
	sub, err := svc.Subscriptions.Create(ctx, "peter@example.com", []byte(`{"issue":"121"}`), "")
	if err != nil {
		t.Fatal(err)
	}
	job := comic.Job{ComicID: l.ID, Gen: l.Gen, AddedAtMs: l.AddedAt.UnixMilli(), Comic: l.Comic.Canonical()}
	if n, err := svc.Matcher.Process(ctx, job); err != nil || n != 1 {
		t.Fatalf("Process = %d, %v; want the first wave of 1", n, err)
	}
	buy := func(token string) apitest.Response {
		return apitest.Request(t, srv, "POST", "/v1/completetransaction", fmt.Sprintf(
			`{"email":"peter@example.com","comic":%q,"payment":"card","hold_token":%q}`, l.ID, token), api.HeaderAPIKey, "w")
	}
	res := buy("")
	res.JSON(t, &eb)
	if ra, _ := strconv.Atoi(res.Header.Get("Retry-After")); res.Status != 409 || eb.Error.Code != "hold_active" || ra < 1 || ra > 600 {
		t.Fatalf("purchase without token: %d %+v Retry-After %d, want 409 hold_active within 600s", res.Status, eb, ra)
	}
	var tl comic.HoldTimeline
	if code := call(t, srv, "GET", "/v1/comics/"+l.ID+"/timeline", "", &tl); code != 200 || tl.Hold == nil || tl.Hold.Wave != 1 ||
		tl.Hold.WindowSeconds != 600 || len(tl.Waves) != 1 || tl.Waves[0].Subscriptions != 1 {
		t.Fatalf("timeline: %d %+v, want the first wave holding for 600s", code, tl)
	}
	tag := svc.Topics().Jobs.HashTag(svc.Topics().Jobs.Partition(l.ID))
	salt, err := rdb.HGet(ctx, "ds:"+tag+":comic:hold:"+l.ID, "salt").Result()
	if err != nil {
		t.Fatal(err)
	}
	if res := buy(comic.HoldToken(salt, sub.ID)); res.Status != 200 {
		t.Fatalf("holder's purchase: %d %s", res.Status, res.Body)
	}
	var after comic.HoldTimeline
	if code := call(t, srv, "GET", "/v1/comics/"+l.ID+"/timeline", "", &after); code != 200 || after.Hold != nil || len(after.Sales) != 1 {
		t.Fatalf("timeline after the sale: %d %+v, want no hold and the sale", code, after)
	}
}
