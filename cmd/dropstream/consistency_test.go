package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/dropstream/dropstream/internal/testenv"
)

// consistencyUsers is the size of the public consistency benchmark of the
// order/stock/payment contract: that many users and orders, one item of
// stock consistencyStock.
const (
	consistencyUsers = 1000
	consistencyStock = 100
)

// contractClient sends the contract's requests and counts 429 answers.
type contractClient struct {
	t       *testing.T
	base    string
	http    *http.Client
	mu      sync.Mutex
	limited int
}

// post sends POST path and returns the status and the decoded body.
func (c *contractClient) post(path string) (int, map[string]any) {
	return c.do(http.MethodPost, path)
}

func (c *contractClient) do(method, path string) (int, map[string]any) {
	req, err := http.NewRequest(method, c.base+path, nil)
	if err != nil {
		c.t.Error(err)
		return 0, nil
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Errorf("%s %s: %v", method, path, err)
		return 0, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(body, &out)
	if resp.StatusCode == http.StatusTooManyRequests {
		c.mu.Lock()
		c.limited++
		c.mu.Unlock()
	}
	return resp.StatusCode, out
}

// concurrently runs f(i) for i in [0, n), each in its own goroutine, all
// released at once.
func concurrently(n int, f func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() { <-start; f(i) })
	}
	close(start)
	wg.Wait()
}

// The public consistency benchmark of the contract, sent as it sends it —
// 1,000 concurrent user creations, one item of stock 100, then 1,000
// concurrent checkouts of one item each — against `demo` and `run` with
// no settings: no answer is 429, and stock, credit and orders agree.
func TestDefaults_consistencyBenchmarkIsNeverRateLimited(t *testing.T) {
	tests := []struct {
		name string
		args func(t *testing.T, addr string) []string
	}{
		{"demo", func(t *testing.T, addr string) []string {
			return []string{"demo", "--api-addr", addr, "--tick", "1h", "--interval", "1h"}
		}},
		{"run", func(t *testing.T, addr string) []string {
			return []string{"run", "--redis-url", testenv.RedisURL(t), "--api-addr", addr}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
			b := startDispatch(t, tt.args(t, addr)...)
			c := &contractClient{t: t, base: "http://" + addr, http: &http.Client{Timeout: 2 * time.Minute,
				Transport: &http.Transport{MaxIdleConnsPerHost: consistencyUsers}}}
			b.waitFor(t, 60*time.Second, func() bool {
				status, _ := get(t, c.base+"/readyz")
				return status == http.StatusOK
			}, "the API ready")
			runConsistencyBenchmark(t, c)
			if err := b.stop(t); err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
		})
	}
}

// runConsistencyBenchmark sends the benchmark's workload through c and
// checks its outcome.
func runConsistencyBenchmark(t *testing.T, c *contractClient) {
	status, item := c.post("/stock/item/create/1")
	itemID, _ := item["item_id"].(string)
	if status != http.StatusOK || itemID == "" {
		t.Fatalf("create item: %d %v", status, item)
	}
	if status, body := c.post("/stock/add/" + itemID + fmt.Sprintf("/%d", consistencyStock)); status != http.StatusOK {
		t.Fatalf("add stock: %d %v", status, body)
	}
	users := make([]string, consistencyUsers)
	orders := make([]string, consistencyUsers)
	concurrently(consistencyUsers, func(i int) {
		status, u := c.post("/payment/create_user")
		users[i], _ = u["user_id"].(string)
		if status != http.StatusOK || users[i] == "" {
			t.Errorf("create_user %d: %d %v", i, status, u)
			return
		}
		if status, body := c.post("/payment/add_funds/" + users[i] + "/1"); status != http.StatusOK {
			t.Errorf("add_funds %d: %d %v", i, status, body)
		}
		status, o := c.post("/orders/create/" + users[i])
		orders[i], _ = o["order_id"].(string)
		if status != http.StatusOK || orders[i] == "" {
			t.Errorf("create order %d: %d %v", i, status, o)
			return
		}
		if status, body := c.post("/orders/addItem/" + orders[i] + "/" + itemID); status != http.StatusOK {
			t.Errorf("addItem %d: %d %v", i, status, body)
		}
	})
	if t.Failed() {
		t.Fatalf("setup failed; %d answers were 429", c.limited)
	}
	answers := make([]int, consistencyUsers)
	concurrently(consistencyUsers, func(i int) {
		answers[i], _ = c.post("/orders/checkout/" + orders[i])
	})
	sold := 0
	for i, a := range answers {
		switch a {
		case http.StatusOK:
			sold++
		case http.StatusBadRequest:
		default:
			t.Errorf("checkout %d answered %d, want 200 or 400", i, a)
		}
	}
	if sold == 0 || sold > consistencyStock {
		t.Errorf("%d checkouts succeeded, want 1 to %d", sold, consistencyStock)
	}
	// Every order and user agrees with its answer, and the stock with the
	// orders sold.
	var mu sync.Mutex
	paid, spent := 0, 0
	concurrently(consistencyUsers, func(i int) {
		_, o := c.do(http.MethodGet, "/orders/find/"+orders[i])
		_, u := c.do(http.MethodGet, "/payment/find_user/"+users[i])
		isPaid, _ := o["paid"].(bool)
		credit, _ := u["credit"].(float64)
		if isPaid != (answers[i] == http.StatusOK) || (credit == 0) != isPaid {
			t.Errorf("order %d paid %v, user credit %v, checkout answered %d", i, isPaid, credit, answers[i])
		}
		mu.Lock()
		defer mu.Unlock()
		if isPaid {
			paid++
		}
		spent += 1 - int(credit)
	})
	_, it := c.do(http.MethodGet, "/stock/find/"+itemID)
	stock, _ := it["stock"].(float64)
	if taken := consistencyStock - int(stock); taken != sold || paid != sold || spent != sold {
		t.Errorf("stock taken %d, orders paid %d, credit spent %d; want each %d (the 200 answers)", taken, paid, spent, sold)
	}
	if c.limited != 0 {
		t.Errorf("%d answers were 429 rate_limited, want none", c.limited)
	}
}
