package checkout_test

import (
	"context"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/dropstream/dropstream/flows/checkout"
)

// itemsInTwoPartitions creates two items of the given price whose ids
// fall in different partitions.
func itemsInTwoPartitions(t *testing.T, e *env, price int) (string, string) {
	t.Helper()
	keys := e.svc.Store().Keys()
	a := str(t, e.must(t, 200, "POST", "/stock/item/create/"+itoa(price)), "item_id")
	for range 100 {
		b := str(t, e.must(t, 200, "POST", "/stock/item/create/"+itoa(price)), "item_id")
		if keys.Partition(a) != keys.Partition(b) {
			return a, b
		}
	}
	t.Fatal("no two items in different partitions")
	return "", ""
}

func TestContract_answersAndErrors(t *testing.T) {
	for _, b := range contractBackends() {
		t.Run(b.name, func(t *testing.T) {
			e := newEnv(t, b.url(t), envOptions{timeout: 20 * time.Second})
			item := str(t, e.must(t, 200, "POST", "/stock/item/create/7"), "item_id")
			user := str(t, e.must(t, 200, "POST", "/payment/create_user"), "user_id")
			tests := []struct {
				method, path string
				code         int
				field        string // a field of the answer to check
				want         any
			}{
				{"GET", "/stock/find/" + item, 200, "price", 7.0},
				{"GET", "/stock/find/" + item, 200, "stock", 0.0},
				{"POST", "/stock/add/" + item + "/5", 200, "stock", 5.0},
				{"POST", "/stock/subtract/" + item + "/2", 200, "stock", 3.0},
				{"POST", "/stock/subtract/" + item + "/4", 400, "", nil},
				{"GET", "/stock/find/" + item, 200, "stock", 3.0},
				{"GET", "/stock/find/nope", 400, "", nil},
				{"POST", "/stock/add/" + item + "/x", 400, "", nil},
				{"POST", "/stock/add/" + item + "/-1", 400, "", nil},
				{"POST", "/stock/item/create/-3", 400, "", nil},
				{"GET", "/payment/find_user/" + user, 200, "credit", 0.0},
				{"POST", "/payment/add_funds/" + user + "/10", 200, "credit", 10.0},
				{"POST", "/payment/pay/" + user + "/4", 200, "credit", 6.0},
				{"POST", "/payment/pay/" + user + "/7", 400, "", nil},
				{"GET", "/payment/find_user/" + user, 200, "credit", 6.0},
				{"GET", "/payment/find_user/nope", 400, "", nil},
				{"POST", "/orders/create/nope", 400, "", nil},
				{"GET", "/orders/find/nope", 400, "", nil},
				{"POST", "/orders/checkout/nope", 400, "", nil},
				{"POST", "/stock/batch_init/3/4/5", 200, "msg", "Batch init for stock successful"},
				{"GET", "/stock/find/2", 200, "stock", 4.0},
				{"POST", "/payment/batch_init/3/9", 200, "msg", "Batch init for users successful"},
				{"GET", "/payment/find_user/2", 200, "credit", 9.0},
				{"POST", "/orders/batch_init/3/3/3/5", 200, "msg", "Batch init for orders successful"},
				{"GET", "/orders/find/2", 200, "total_cost", 10.0},
				{"POST", "/stock/batch_init/x/4/5", 400, "", nil},
			}
			for _, tt := range tests {
				code, out, err := e.call(t, tt.method, tt.path)
				if err != nil || code != tt.code {
					t.Errorf("%s %s = %d %v, %v; want %d", tt.method, tt.path, code, out, err, tt.code)
					continue
				}
				if code == 400 {
					msg, _ := out["error"].(map[string]any)["message"].(string)
					if msg == "" {
						t.Errorf("%s %s: 400 without a message: %v", tt.method, tt.path, out)
					}
				}
				if tt.field != "" && out[tt.field] != tt.want {
					t.Errorf("%s %s: %s = %v, want %v", tt.method, tt.path, tt.field, out[tt.field], tt.want)
				}
			}
			order := str(t, e.must(t, 200, "POST", "/orders/create/"+user), "order_id")
			e.must(t, 200, "POST", "/orders/addItem/"+order+"/"+item)
			if got := num(t, e.must(t, 200, "POST", "/orders/addItem/"+order+"/"+item+"/2"), "total_cost"); got != 21 {
				t.Errorf("total cost after 1 + 2 items at 7: %d, want 21", got)
			}
			// Quantity defaults to 1.
			o := e.must(t, 200, "GET", "/orders/find/"+order)
			want := map[string]any{"order_id": order, "paid": false, "user_id": user, "total_cost": 21.0,
				"items": []any{[]any{item, 1.0}, []any{item, 2.0}}}
			if !reflect.DeepEqual(o, want) {
				t.Errorf("find order = %v, want %v", o, want)
			}
			// batch_init ids are "0".."n-1": the orders are of users and
			// items of those ids, two lines of quantity 1 each.
			for i := range 3 {
				o := e.must(t, 200, "GET", "/orders/find/"+itoa(i))
				lines, _ := o["items"].([]any)
				if o["order_id"] != itoa(i) || !slices.Contains([]any{"0", "1", "2"}, o["user_id"]) || o["paid"] != false || len(lines) != 2 {
					t.Errorf("batch order %d = %v", i, o)
				}
				for _, l := range lines {
					if l, _ := l.([]any); len(l) != 2 || !slices.Contains([]any{"0", "1", "2"}, l[0]) || l[1] != 1.0 {
						t.Errorf("batch order %d line %v, want [\"0\"..\"2\", 1]", i, l)
					}
				}
			}
			e.must(t, 200, "GET", "/stock/find/0")
			e.must(t, 200, "GET", "/payment/find_user/0")
			e.must(t, 400, "POST", "/orders/addItem/"+order+"/nope")
			e.must(t, 400, "POST", "/orders/addItem/"+order+"/"+item+"/0")
		})
	}
}

func TestContract_checkoutPaysOnceAndCompensatesBeforeFailing(t *testing.T) {
	for _, b := range contractBackends() {
		t.Run(b.name, func(t *testing.T) {
			e := newEnv(t, b.url(t), envOptions{timeout: 20 * time.Second})
			a, c := itemsInTwoPartitions(t, e, 3)
			e.must(t, 200, "POST", "/stock/add/"+a+"/10")
			e.must(t, 200, "POST", "/stock/add/"+c+"/10")
			user := str(t, e.must(t, 200, "POST", "/payment/create_user"), "user_id")
			e.must(t, 200, "POST", "/payment/add_funds/"+user+"/20")
			stock := func(id string) int64 { return num(t, e.must(t, 200, "GET", "/stock/find/"+id), "stock") }
			credit := func() int64 { return num(t, e.must(t, 200, "GET", "/payment/find_user/"+user), "credit") }

			// 2 of a and 1 of c: 9 of 20 credit.
			paid := str(t, e.must(t, 200, "POST", "/orders/create/"+user), "order_id")
			e.must(t, 200, "POST", "/orders/addItem/"+paid+"/"+a+"/2")
			e.must(t, 200, "POST", "/orders/addItem/"+paid+"/"+c)
			if out := e.must(t, 200, "POST", "/orders/checkout/"+paid); out["already_paid"] != false || num(t, out, "tr_num") != 1 {
				t.Errorf("first checkout = %v", out)
			}
			if stock(a) != 8 || stock(c) != 9 || credit() != 11 {
				t.Errorf("after checkout: stock %d, %d, credit %d; want 8, 9, 11", stock(a), stock(c), credit())
			}
			if out := e.must(t, 200, "POST", "/orders/checkout/"+paid); out["already_paid"] != true {
				t.Errorf("second checkout = %v, want already_paid", out)
			}
			if stock(a) != 8 || stock(c) != 9 || credit() != 11 {
				t.Errorf("after a second checkout: stock %d, %d, credit %d; want unchanged 8, 9, 11", stock(a), stock(c), credit())
			}
			if find := e.must(t, 200, "GET", "/orders/find/"+paid); find["paid"] != true {
				t.Errorf("paid order found as %v", find)
			}
			e.must(t, 400, "POST", "/orders/addItem/"+paid+"/"+a)

			// Short credit: 4 of each at 3 = 24 > 11. Both stock parts
			// succeed and are undone before the answer.
			short := str(t, e.must(t, 200, "POST", "/orders/create/"+user), "order_id")
			e.must(t, 200, "POST", "/orders/addItem/"+short+"/"+a+"/4")
			e.must(t, 200, "POST", "/orders/addItem/"+short+"/"+c+"/4")
			code, out, err := e.call(t, "POST", "/orders/checkout/"+short)
			if err != nil || code != http.StatusBadRequest {
				t.Fatalf("checkout with short credit = %d %v %v, want 400", code, out, err)
			}
			if stock(a) != 8 || stock(c) != 9 || credit() != 11 {
				t.Errorf("right after a failed checkout: stock %d, %d, credit %d; want 8, 9, 11", stock(a), stock(c), credit())
			}
			// Short stock on one partition, after adding credit: attempt 2
			// fails on stock, its payment and the other part are undone.
			e.must(t, 200, "POST", "/payment/add_funds/"+user+"/100")
			e.must(t, 200, "POST", "/orders/addItem/"+short+"/"+c+"/6")
			code, out, _ = e.call(t, "POST", "/orders/checkout/"+short)
			msg, _ := out["error"].(map[string]any)["message"].(string)
			if code != 400 || msg != "checkout failed: insufficient stock for item "+c {
				t.Errorf("checkout with short stock = %d %v", code, out)
			}
			if stock(a) != 8 || stock(c) != 9 || credit() != 111 {
				t.Errorf("after a failed checkout: stock %d, %d, credit %d; want 8, 9, 111", stock(a), stock(c), credit())
			}
			// Attempt 3 succeeds once the stock is there.
			e.must(t, 200, "POST", "/stock/add/"+c+"/10")
			if out := e.must(t, 200, "POST", "/orders/checkout/"+short); num(t, out, "tr_num") != 3 {
				t.Errorf("third attempt = %v", out)
			}
			if stock(a) != 4 || stock(c) != 9 || credit() != 111-42 {
				t.Errorf("after the third attempt: stock %d, %d, credit %d; want 4, 9, 69", stock(a), stock(c), credit())
			}
		})
	}
}

func TestCheckout_oneTraceCoversTheSaga(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	e := newEnv(t, miniredisURL(t), envOptions{timeout: 20 * time.Second, tracer: tp})
	order, _, c := compensatedCheckout(t, e)
	var traceID string
	for _, s := range rec.Ended() {
		if s.Name() == "POST /orders/checkout/:order_id" {
			traceID = s.SpanContext().TraceID().String()
		}
	}
	if traceID == "" {
		t.Fatal("no server span of the checkout")
	}
	// Three parts (two stock partitions, payment), three forward effects;
	// stock of c fails, the other two are compensated.
	want := map[string]int{"checkout.stock": 3, "checkout.payment": 2}
	// The answer may come before the stage ends the span of the outcome
	// that decided: the script that finishes the attempt announces it.
	var got map[string]int
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got = map[string]int{}
		for _, s := range rec.Ended() {
			if _, ok := want[s.Name()]; ok && s.SpanContext().TraceID().String() == traceID {
				got[s.Name()]++
			}
		}
		if maps.Equal(got, want) || time.Now().After(deadline) {
			break
		}
	}
	for name, n := range want {
		if got[name] != n {
			t.Errorf("%d %q spans in the checkout's trace, want %d (all: %v)", got[name], name, n, got)
		}
	}
	st, reason, err := e.svc.SagaStatus(context.Background(), order, 1)
	if err != nil || st != checkout.StatusFailed || reason != "insufficient stock for item "+c {
		t.Errorf("saga = %q %q %v", st, reason, err)
	}
}

// An order whose total is 0 — empty, or of items priced 0 — is paid at
// once: its payment takes nothing (a zero amount is not sent to Redis as
// "-0", which HINCRBY refuses) and its stock part runs as for any order.
func TestContract_zeroTotalOrderIsPaidAtOnce(t *testing.T) {
	for _, b := range contractBackends() {
		t.Run(b.name, func(t *testing.T) {
			e := newEnv(t, b.url(t), envOptions{timeout: 5 * time.Second})
			free := str(t, e.must(t, 200, "POST", "/stock/item/create/0"), "item_id")
			e.must(t, 200, "POST", "/stock/add/"+free+"/3")
			user := str(t, e.must(t, 200, "POST", "/payment/create_user"), "user_id")
			e.must(t, 200, "POST", "/payment/add_funds/"+user+"/7")
			empty := str(t, e.must(t, 200, "POST", "/orders/create/"+user), "order_id")
			priced0 := str(t, e.must(t, 200, "POST", "/orders/create/"+user), "order_id")
			e.must(t, 200, "POST", "/orders/addItem/"+priced0+"/"+free+"/2")
			for _, order := range []string{empty, priced0} {
				if out := e.must(t, 200, "POST", "/orders/checkout/"+order); out["already_paid"] != false {
					t.Errorf("checkout of %s = %v", order, out)
				}
				if find := e.must(t, 200, "GET", "/orders/find/"+order); find["paid"] != true {
					t.Errorf("order %s found as %v, want paid", order, find)
				}
			}
			if s := num(t, e.must(t, 200, "GET", "/stock/find/"+free), "stock"); s != 1 {
				t.Errorf("stock of the free item = %d, want 1", s)
			}
			if c := num(t, e.must(t, 200, "GET", "/payment/find_user/"+user), "credit"); c != 7 {
				t.Errorf("credit = %d, want 7 (nothing charged)", c)
			}
		})
	}
}
