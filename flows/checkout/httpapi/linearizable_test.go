package httpapi_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/flows/checkout"
	"github.com/dropstream/dropstream/flows/checkout/checkouttest"
	"github.com/dropstream/dropstream/flows/checkout/httpapi"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// serve runs the checkout flow, its stages and its routes in process over
// a Redis database of the test's own, and returns the API's base URL.
func serve(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	rdb, err := stream.Dial(ctx, testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	tel := stream.Telemetry{Logger: slog.New(slog.DiscardHandler)}
	svc, err := checkout.NewWith(rdb, stream.NewPublisher(rdb, tel), checkout.Config{Partitions: 4}, tel)
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() { _ = svc.Run(ctx) })
	for _, s := range svc.Stages() {
		r, err := stream.NewRunner(rdb, s, tel)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { _ = r.Run(ctx) })
	}
	srv, err := api.New(api.Config{Addr: "127.0.0.1:0", Logger: tel.Logger, RateLimit: api.RateLimitConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	httpapi.Register(srv, svc)
	wg.Go(func() { _ = srv.Listen(ctx) })
	select {
	case <-srv.Listening():
	case <-time.After(10 * time.Second):
		t.Fatal("the API does not listen")
	}
	select {
	case <-svc.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("the flow is not ready")
	}
	return "http://" + srv.Addr()
}

// run drives a workload of 8 clients, 150 calls each, at base, settles it
// and checks its history.
func run(t *testing.T, base string) checkouttest.Result {
	t.Helper()
	ctx := context.Background()
	w, err := checkouttest.NewWorkload(ctx, base, checkouttest.WorkloadConfig{MaxOps: 150})
	if err != nil {
		t.Fatal(err)
	}
	w.Run(ctx)
	if err := w.Settle(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	return checkouttest.Check(t, w.Recorder().History())
}

func TestContract_Linearizable(t *testing.T) {
	res := run(t, serve(t))
	if !res.Linearizable() {
		t.Errorf("the contract's history is not linearizable: %s", res)
	}
	if res.Operations < 8*150 {
		t.Errorf("%d operations recorded, want at least %d", res.Operations, 8*150)
	}
}

// A checker is only worth what it catches: between the clients and a
// correct server, a proxy plants a bug, and the checker must report it.
func TestContract_LinearizableCheckerCatchesPlantedBugs(t *testing.T) {
	for _, tc := range []struct {
		name string
		// bug handles a request the proxy p would forward; it returns
		// false to let p forward it unchanged.
		bug func(w http.ResponseWriter, r *http.Request, p *httputil.ReverseProxy) bool
	}{
		{"a payment applied twice (its idempotency turned off)", func(w http.ResponseWriter, r *http.Request, p *httputil.ReverseProxy) bool {
			if !strings.HasPrefix(r.URL.Path, "/payment/pay/") {
				return false
			}
			p.ServeHTTP(httptest.NewRecorder(), r.Clone(r.Context()))
			p.ServeHTTP(w, r)
			return true
		}},
		{"a checkout answered paid before its write", func(w http.ResponseWriter, r *http.Request, p *httputil.ReverseProxy) bool {
			if !strings.HasPrefix(r.URL.Path, "/orders/checkout/") {
				return false
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"paid":true,"already_paid":false}`)
			p.ServeHTTP(httptest.NewRecorder(), r.Clone(context.WithoutCancel(r.Context())))
			return true
		}},
		{"a stock change lost after its answer", func(w http.ResponseWriter, r *http.Request, p *httputil.ReverseProxy) bool {
			if !strings.HasPrefix(r.URL.Path, "/stock/add/") {
				return false
			}
			// Answers the stock the item would have, but subtracts
			// instead: the acknowledged add never happened.
			rec := httptest.NewRecorder()
			p.ServeHTTP(rec, r)
			undo := r.Clone(r.Context())
			undo.URL.Path = strings.Replace(r.URL.Path, "/stock/add/", "/stock/subtract/", 1)
			p.ServeHTTP(httptest.NewRecorder(), undo)
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
			return true
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target, err := url.Parse(serve(t))
			if err != nil {
				t.Fatal(err)
			}
			p := httputil.NewSingleHostReverseProxy(target)
			proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !tc.bug(w, r, p) {
					p.ServeHTTP(w, r)
				}
			}))
			t.Cleanup(proxy.Close)
			res := run(t, proxy.URL)
			if res.Undecided || len(res.Anomalies) == 0 {
				t.Fatalf("the checker found no anomaly in a history with a planted bug: %s", res)
			}
			if res.Visualization == "" {
				t.Errorf("no visualization saved for the anomalies")
			}
		})
	}
}
