package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dropstream/dropstream/internal/testenv"
)

// lockedBuffer collects a process's output.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// buildDropstream builds cmd/dropstream into the test's directory.
func buildDropstream(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "dropstream")
	build := exec.Command("go", "build", "-o", bin, "./cmd/dropstream")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/dropstream: %v\n%s", err, out)
	}
	return bin
}

// startDropstream runs bin with args and env (on top of PATH and HOME only),
// stopped when the test ends; its output is shown if the test fails.
func startDropstream(t *testing.T, bin, name string, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("output of %s:\n%s", name, out)
		}
	})
}

// promQuery runs an instant query and returns the number of series of its
// result, or an error (a bad query, Prometheus unreachable).
func promQuery(base, expr string) (int, error) {
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return 0, fmt.Errorf("%d %s", resp.StatusCode, body)
	}
	if r.Status != "success" {
		return 0, fmt.Errorf("%s", r.Error)
	}
	return len(r.Data.Result), nil
}

// post calls a route of the API at base and decodes its JSON answer.
func post(t *testing.T, base, path, body string, out any) {
	t.Helper()
	resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		t.Fatalf("POST %s = %d %s", path, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("POST %s: %v: %s", path, err, b)
		}
	}
}

// TestPrometheus_dashboardQueriesReturnData runs two dropstream processes
// scraped by the real Prometheus of the test environment (on the project's
// prometheus.yml), drives every flow the dashboards show, and executes
// every Prometheus query of every Grafana dashboard until each returns
// data. A metric renamed in the code, or a query that does not parse, fails
// it. One process writes its history to ClickHouse; the other's ClickHouse
// database has no tables, so its appends fail and the error panels have data
// too. Prometheus must also have loaded the project's alert rules.
func TestPrometheus_dashboardQueriesReturnData(t *testing.T) {
	prom := testenv.PrometheusServer(t)
	bin := buildDropstream(t)
	good, broken := testenv.ClickHouseDSN(t), testenv.ClickHouseDSN(t)
	if out, err := exec.Command(bin, "migrate", "--clickhouse-dsn", good).CombinedOutput(); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(failing.Close)

	var addrs []string
	for i, dsn := range []string{good, broken} {
		addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
		addrs = append(addrs, addr)
		startDropstream(t, bin, fmt.Sprintf("demo %d", i), []string{
			"DROPSTREAM_REDIS_URL=" + testenv.RedisURL(t), "DROPSTREAM_CLICKHOUSE_DSN=" + dsn,
			"DROPSTREAM_EGRESS_ALLOW=127.0.0.1", "DROPSTREAM_LOG_LEVEL=warn",
		}, "demo", "--api-addr", addr, "--tick", "200ms", "--interval", "1s", "--churn", "0.3", "--status-every", "1h")
	}
	prom.Scrape(t, map[string]string{"test": t.Name()}, addrs...)
	base := "http://" + addrs[0]
	testenv.WaitFor(t, 60*time.Second, func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, "the first demo ready")

	// A watcher whose webhook always fails: failed deliveries by error type.
	post(t, base, "/v1/watchers", `{"name":"failing receiver","provider":"simulator","channel":"webhook","webhook_url":"`+failing.URL+`/hook"}`, nil)
	// Checkouts: one paid, one refused for lack of credit.
	var item struct {
		ItemID string `json:"item_id"`
	}
	post(t, base, "/stock/item/create/10", "", &item)
	post(t, base, "/stock/add/"+item.ItemID+"/5", "", nil)
	for _, credit := range []int{100, 1} {
		var u struct {
			UserID string `json:"user_id"`
		}
		post(t, base, "/payment/create_user", "", &u)
		post(t, base, fmt.Sprintf("/payment/add_funds/%s/%d", u.UserID, credit), "", nil)
		var o struct {
			OrderID string `json:"order_id"`
		}
		post(t, base, "/orders/create/"+u.UserID, "", &o)
		post(t, base, "/orders/addItem/"+o.OrderID+"/"+item.ItemID, "", nil)
		resp, err := http.Post(base+"/orders/checkout/"+o.OrderID, "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}

	queries := map[string]string{} // expr → where
	for _, d := range loadDashboards(t) {
		for _, p := range d.allPanels() {
			for _, tg := range p.Targets {
				if tg.Expr != "" {
					queries[strings.ReplaceAll(tg.Expr, "$__rate_interval", "30s")] = d.file + ": " + p.Title
				}
			}
		}
	}
	if len(queries) == 0 {
		t.Fatal("no Prometheus query in the dashboards")
	}
	empty := map[string]string{}
	testenv.WaitFor(t, 3*time.Minute, func() bool {
		clear(empty)
		for expr, where := range queries {
			n, err := promQuery(prom.URL, expr)
			if err != nil {
				t.Fatalf("%s: query %s: %v", where, expr, err)
			}
			if n == 0 {
				empty[expr] = where
			}
		}
		return len(empty) == 0
	}, "every dashboard query to return data (still empty: %v)", empty)

	resp, err := http.Get(prom.URL + "/api/v1/rules")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rules struct {
		Data struct {
			Groups []struct {
				Rules []struct {
					Name string `json:"name"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&rules); err != nil {
		t.Fatal(err)
	}
	var loaded []string
	for _, g := range rules.Data.Groups {
		for _, r := range g.Rules {
			loaded = append(loaded, r.Name)
		}
	}
	for _, a := range alertRe.FindAllStringSubmatch(readFile(t, "prometheus/alerts.yml"), -1) {
		if !slices.Contains(loaded, a[1]) {
			t.Errorf("Prometheus did not load alert %s (loaded: %v)", a[1], loaded)
		}
	}
}
