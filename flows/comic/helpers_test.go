package comic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/dropstream/dropstream/internal/egress/egresstest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/subscriber"
	"github.com/dropstream/dropstream/stream"
)

// registerNotifyKind registers KindNotify, as New does on the notifier
// flow, for a test that relays requests from a flow built by NewWith.
func registerNotifyKind(t *testing.T) {
	t.Helper()
	if err := subscriber.RegisterKind(NotifyKind()); err != nil {
		t.Fatal(err)
	}
}

// backends are the Redis implementations the flow's tests run on.
func backends() []testenv.Backend { return testenv.Backends() }

const waitTimeout = 20 * time.Second

const testSecret = "0123456789abcdef0123456789abcdef"

// verify checks a webhook's Standard Webhooks signature with the
// specification's library, keyed with secret's bytes.
func verify(secret string, h http.Header, body []byte) error {
	wh, _ := standardwebhooks.NewWebhookRaw([]byte(secret)) // never fails
	return wh.Verify(body, h)
}

// receiver is a POST /notify endpoint that records what it receives,
// signed with its secret (testSecret unless set).
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []NotifyBody
	fail   int // answer 503 to this many requests first
	secret string
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{secret: testSecret}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		if err := verify(r.secret, req.Header, body); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		if r.fail > 0 {
			r.fail--
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		var n NotifyBody
		_ = json.Unmarshal(body, &n)
		r.got = append(r.got, n)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) URL() string { return r.srv.URL + "/notify" }

// received returns (comic id, email) → deliveries.
func (r *receiver) received() map[[2]string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[[2]string]int{}
	for _, n := range r.got {
		out[[2]string{n.ComicID, n.Email}]++
	}
	return out
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// testPayments records charges and refunds, refusing the payment "bad".
type testPayments struct {
	mu       sync.Mutex
	charged  map[string]int64
	refunded map[string]int64
	// charges and refunds count the calls that moved money, per txn.
	charges, refunds map[string]int
	// crashAfterCharge: the next charge of these txns charges, then fails
	// as if the process died before the sale.
	crashAfterCharge map[string]bool
	// onCharge, when set, runs at the start of every charge.
	onCharge func(txn string)
}

func newTestPayments() *testPayments {
	return &testPayments{charged: map[string]int64{}, refunded: map[string]int64{}, charges: map[string]int{},
		refunds: map[string]int{}, crashAfterCharge: map[string]bool{}}
}

func (p *testPayments) Charge(_ context.Context, txn, payment string, cents int64) error {
	if payment == "bad" {
		return fmt.Errorf("%w: bad card", ErrDeclined)
	}
	if p.onCharge != nil {
		p.onCharge(txn)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, done := p.charged[txn]; !done { // idempotent by txn
		p.charged[txn] = cents
		p.charges[txn]++
	}
	if p.crashAfterCharge[txn] {
		delete(p.crashAfterCharge, txn)
		return errCrash
	}
	return nil
}

// errCrash is the failure of a charge whose process died after charging.
var errCrash = errors.New("connection lost after the charge")

func (p *testPayments) Refund(_ context.Context, txn, _ string, cents int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, done := p.refunded[txn]; !done {
		p.refunded[txn] = cents
		p.refunds[txn]++
	}
	return nil
}

// newService returns the flow over rdb with the receiver as its /notify
// destination, 2 partitions.
func newService(t *testing.T, rdb redis.UniversalClient, r *receiver, p Payments, store StoreConfig) *Flow {
	t.Helper()
	// The receivers of the tests listen on loopback.
	cfg := Config{Partitions: 2, Store: store, Webhook: notifier.WebhookConfig{Egress: egresstest.Loopback(t)}}
	if r != nil {
		cfg.Delivery = DeliveryConfig{NotifyURL: r.URL(), NotifySecret: testSecret}
	}
	svc, err := NewWith(rdb, cfg, p, stream.Telemetry{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// fastConfig makes a crashed copy's messages claimable within a second.
func fastConfig(consumer string) stream.RunnerConfig {
	return stream.RunnerConfig{Consumer: consumer, Block: 50 * time.Millisecond, ClaimInterval: 100 * time.Millisecond,
		ClaimIdle: time.Second, HandlerTimeout: 400 * time.Millisecond, Retry: stream.RetryConfig{Disabled: true},
		MaxDeliveries: 20, StatsInterval: time.Second}
}

// run runs stages until the test ends.
func run(t *testing.T, rdb redis.UniversalClient, stages ...stream.Stage) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, s := range stages {
		if s.Config.Consumer == "" {
			s.Config = fastConfig(s.Name + "-main")
		}
		r, err := stream.NewRunner(rdb, s, stream.Telemetry{Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { _ = r.Run(ctx) })
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
}

// comicN returns a valid comic of a series and issue.
func comicN(series string, issue int, publisher string, key bool) Comic {
	return Comic{Grade: 9.8, Issue: itoa(issue), KeyIssue: key, PriceCents: 10000 + int64(issue), Printing: 1,
		Publisher: publisher, Series: series, Title: "Title " + itoa(issue), Year: 1990}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func mustSubscribe(t *testing.T, s *Store, email, body string) Subscription {
	t.Helper()
	sub, err := s.Create(context.Background(), email, json.RawMessage(body), "")
	if err != nil {
		t.Fatalf("subscribe %s to %s: %v", email, body, err)
	}
	return sub
}

// holdState is a hold's salt and end.
type holdState struct {
	ends int64
	salt string
}

// state reads a comic's hold record.
func (h *Holds) state(ctx context.Context, id string) (holdState, error) {
	v, err := h.rdb.HMGet(ctx, holdKey(h.topics.tag(id), id), "ends", "salt").Result()
	if err != nil {
		return holdState{}, fmt.Errorf("comic: hold of %s: %w", id, err)
	}
	st := holdState{salt: str(v[1])}
	st.ends, _ = strconv.ParseInt(str(v[0]), 10, 64)
	return st, nil
}

// newMatcher returns a matcher telling waves on the notify topic of topics
// with the default HoldConfig.
func newMatcher(rdb redis.UniversalClient, topics Topics) *Matcher {
	return NewMatcher(rdb, topics, &streamHandoff{rdb: rdb, topics: topics, holds: newHolds(rdb, topics, HoldConfig{}, nil)}, nil)
}
