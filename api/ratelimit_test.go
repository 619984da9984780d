package api

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
)

// limitedServer has write and read routes under /v1 and a slow refill, so
// that no token comes back while a test runs.
func limitedServer(t *testing.T, keys string, rl RateLimitConfig) *Server {
	t.Helper()
	s, _ := newTestServer(t, Config{APIKeys: keys, RateLimit: rl})
	ok := func(c *fiber.Ctx) error { return c.JSON(map[string]string{"caller": Caller(c)}) }
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		s.Group("/v1", ScopeWrite).Add(m, "/things", ok)
	}
	return s
}

func send(t *testing.T, s *Server, method, key, addr string) response {
	t.Helper()
	req, err := http.NewRequest(method, "/v1/things", nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if addr != "" {
		req.RemoteAddr = addr
	}
	return do(t, s, req)
}

func TestRateLimit_writesBeyondTheBurstAre429(t *testing.T) {
	slow := RateLimitConfig{Rate: 0.01, Burst: 3}
	tests := []struct {
		name string
		keys string
		rl   RateLimitConfig
		// calls are method and key; want the statuses in order.
		calls [][2]string
		want  []int
	}{
		{"open API: per address, every write method counts", "", slow,
			[][2]string{{"POST", ""}, {"PUT", ""}, {"DELETE", ""}, {"PATCH", ""}, {"POST", ""}},
			[]int{200, 200, 200, 429, 429}},
		{"reads are not limited", "", slow,
			[][2]string{{"POST", ""}, {"POST", ""}, {"POST", ""}, {"GET", ""}, {"GET", ""}, {"POST", ""}},
			[]int{200, 200, 200, 200, 200, 429}},
		{"each key has its own bucket", "a:write;b:write", slow,
			[][2]string{{"POST", "a"}, {"POST", "a"}, {"POST", "a"}, {"POST", "a"}, {"POST", "b"}, {"POST", "b"}},
			[]int{200, 200, 200, 429, 200, 200}},
		{"refused before authentication costs nothing", "a:write", slow,
			[][2]string{{"POST", "nope"}, {"POST", "nope"}, {"POST", "nope"}, {"POST", "nope"}, {"POST", "a"}, {"POST", "a"}, {"POST", "a"}, {"POST", "a"}},
			[]int{401, 401, 401, 401, 200, 200, 200, 429}},
		{"disabled", "", RateLimitConfig{Rate: 0.01, Burst: 1, Disabled: true},
			[][2]string{{"POST", ""}, {"POST", ""}, {"POST", ""}},
			[]int{200, 200, 200}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := limitedServer(t, tt.keys, tt.rl)
			for i, call := range tt.calls {
				r := send(t, s, call[0], call[1], "")
				if r.status != tt.want[i] {
					t.Fatalf("call %d %s: status %d, want %d (%s)", i, call[0], r.status, tt.want[i], r.body)
				}
				if r.status == http.StatusTooManyRequests {
					wantEnvelope(t, r, http.StatusTooManyRequests, "rate_limited")
					if got := r.header.Get("Retry-After"); got != "100" {
						t.Errorf("Retry-After %q, want 100 (one write at 0.01/s)", got)
					}
				}
			}
		})
	}
}

func TestRateLimit_callersAreKeysOrAddresses(t *testing.T) {
	s := limitedServer(t, "a:write", RateLimitConfig{})
	r := send(t, s, "GET", "a", "")
	if r.status != 200 || !strings.Contains(string(r.body), `"caller":"key:`) || strings.Contains(string(r.body), `:a"`) {
		t.Fatalf("caller of key a: %d %s; want key:<digest>", r.status, r.body)
	}
	open := limitedServer(t, "", RateLimitConfig{})
	if r := send(t, open, "GET", "", ""); !strings.Contains(string(r.body), `"caller":"addr:`) {
		t.Fatalf("caller on the open API: %s; want addr:<ip>", r.body)
	}
}

func TestRateLimit_fullTableRefusesNewCallersUntilOneIsIdle(t *testing.T) {
	s := limitedServer(t, "a:write;b:write", RateLimitConfig{Rate: 0.01, Burst: 2, MaxCallers: 1})
	if r := send(t, s, "POST", "a", ""); r.status != 200 {
		t.Fatalf("first caller: %d", r.status)
	}
	if r := send(t, s, "POST", "b", ""); r.status != http.StatusTooManyRequests {
		t.Fatalf("second caller while the first is busy: %d, want 429", r.status)
	}
}

func TestRateLimitConfig_validateReportsEveryError(t *testing.T) {
	err := RateLimitConfig{Rate: -1, Burst: -2, MaxCallers: -3}.Validate()
	for _, want := range []string{"Rate", "Burst", "MaxCallers"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
	if !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("error %v does not wrap ErrInvalidConfig", err)
	}
	if err := (RateLimitConfig{}).Validate(); err != nil {
		t.Errorf("zero config: %v", err)
	}
	if _, err := New(Config{RateLimit: RateLimitConfig{Burst: -1}}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("New with a bad rate limit: %v, want ErrInvalidConfig", err)
	}
}
