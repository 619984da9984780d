package api

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
)

// slow is a limit whose tokens do not come back while a test runs.
func slow(burst int) Limit { return Limit{Rate: 0.01, Burst: burst} }

// limitedServer has, under /v1, a POST operation of each class at
// /v1/<class> ("unset" names none), a public one at /v1/public, and
// routes of every method at /v1/things added through Group.
func limitedServer(t *testing.T, keys string, rl RateLimitConfig) *Server {
	t.Helper()
	s, _ := newTestServer(t, Config{APIKeys: keys, RateLimit: rl})
	ok := func(c *fiber.Ctx) error { return c.JSON(map[string]string{"caller": Caller(c)}) }
	for _, class := range append([]Class{ClassUnset}, Classes...) {
		s.Handle(Operation{Method: "POST", Path: "/v1/" + class.String(), Scope: ScopeWrite, Class: class,
			Public: class == ClassPublic, Handler: ok})
	}
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		s.Group("/v1", ScopeWrite).Add(m, "/things", ok)
	}
	return s
}

func send(t *testing.T, s *Server, method, path, key string) response {
	t.Helper()
	req, err := http.NewRequest(method, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return do(t, s, req)
}

// call is one request of a table: method, path and key.
type call struct{ method, path, key string }

func post(path, key string) call { return call{"POST", path, key} }

func TestRateLimit_eachClassHasItsOwnLimit(t *testing.T) {
	tight := RateLimitConfig{Create: slow(2), Contract: slow(3), Change: slow(1), Read: slow(1), Admin: slow(1), Public: slow(1)}
	tests := []struct {
		name  string
		keys  string
		rl    RateLimitConfig
		calls []call
		want  []int
	}{
		{"a caller above the contract limit is refused", "", tight,
			[]call{post("/v1/contract", ""), post("/v1/contract", ""), post("/v1/contract", ""), post("/v1/contract", "")},
			[]int{200, 200, 200, 429}},
		{"classes are isolated: a spent create bucket leaves the others full", "", tight,
			[]call{post("/v1/create", ""), post("/v1/create", ""), post("/v1/create", ""),
				post("/v1/contract", ""), post("/v1/change", ""), post("/v1/read", ""), post("/v1/admin", ""), post("/v1/public", ""),
				post("/v1/change", "")},
			[]int{200, 200, 429, 200, 200, 200, 200, 200, 429}},
		{"an operation without a class is limited as create, in create's bucket", "", tight,
			[]call{post("/v1/unset", ""), post("/v1/create", ""), post("/v1/unset", ""), post("/v1/contract", "")},
			[]int{200, 200, 429, 200}},
		{"routes added through Group: reads in the read bucket, writes in the create bucket", "", tight,
			[]call{{"POST", "/v1/things", ""}, {"PUT", "/v1/things", ""}, {"DELETE", "/v1/things", ""},
				{"GET", "/v1/things", ""}, {"GET", "/v1/things", ""}},
			[]int{200, 200, 429, 200, 429}},
		{"each key has its own buckets", "a:write;b:write", tight,
			[]call{post("/v1/change", "a"), post("/v1/change", "a"), post("/v1/change", "b")},
			[]int{200, 429, 200}},
		{"refused before authentication costs nothing", "a:write", tight,
			[]call{post("/v1/change", "nope"), post("/v1/change", "nope"), post("/v1/change", "a"), post("/v1/change", "a")},
			[]int{401, 401, 200, 429}},
		{"a public route is limited per address without a key", "a:write", tight,
			[]call{post("/v1/public", ""), post("/v1/public", "")},
			[]int{200, 429}},
		{"disabled", "", RateLimitConfig{Contract: slow(1), Disabled: true},
			[]call{post("/v1/contract", ""), post("/v1/contract", ""), post("/v1/contract", "")},
			[]int{200, 200, 200}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := limitedServer(t, tt.keys, tt.rl)
			for i, c := range tt.calls {
				r := send(t, s, c.method, c.path, c.key)
				if r.status != tt.want[i] {
					t.Fatalf("call %d %s %s: status %d, want %d (%s)", i, c.method, c.path, r.status, tt.want[i], r.body)
				}
				if r.status == http.StatusTooManyRequests {
					wantEnvelope(t, r, http.StatusTooManyRequests, "rate_limited")
					if got := r.header.Get("Retry-After"); got != "100" {
						t.Errorf("Retry-After %q, want 100 (one request at 0.01/s)", got)
					}
				}
			}
		})
	}
}

// A key's own rate= and burst= replace the class defaults for that key;
// another key keeps the defaults.
func TestRateLimit_keyLimitsReplaceTheClassDefaults(t *testing.T) {
	s := limitedServer(t, "big:write:rate=0.01:burst=4;small:write", RateLimitConfig{Change: slow(1), Contract: slow(2)})
	for _, tt := range []struct {
		key, path string
		pass      int
	}{
		{"big", "/v1/change", 4},
		{"big", "/v1/contract", 4},
		{"small", "/v1/change", 1},
		{"small", "/v1/contract", 2},
	} {
		for i := range tt.pass + 1 {
			want := http.StatusOK
			if i == tt.pass {
				want = http.StatusTooManyRequests
			}
			if r := send(t, s, "POST", tt.path, tt.key); r.status != want {
				t.Fatalf("key %s, %s request %d: %d, want %d (%s)", tt.key, tt.path, i, r.status, want, r.body)
			}
		}
	}
}

func TestRateLimit_callersAreKeysOrAddresses(t *testing.T) {
	s := limitedServer(t, "a:write", RateLimitConfig{})
	r := send(t, s, "GET", "/v1/things", "a")
	if r.status != 200 || !strings.Contains(string(r.body), `"caller":"key:`) || strings.Contains(string(r.body), `:a"`) {
		t.Fatalf("caller of key a: %d %s; want key:<digest>", r.status, r.body)
	}
	open := limitedServer(t, "", RateLimitConfig{})
	if r := send(t, open, "GET", "/v1/things", ""); !strings.Contains(string(r.body), `"caller":"addr:`) {
		t.Fatalf("caller on the open API: %s; want addr:<ip>", r.body)
	}
}

func TestRateLimit_fullTableRefusesNewBucketsUntilOneIsIdle(t *testing.T) {
	s := limitedServer(t, "a:write;b:write", RateLimitConfig{Change: slow(2), MaxBuckets: 1})
	if r := send(t, s, "POST", "/v1/change", "a"); r.status != 200 {
		t.Fatalf("first caller: %d", r.status)
	}
	if r := send(t, s, "POST", "/v1/change", "b"); r.status != http.StatusTooManyRequests {
		t.Fatalf("second caller while the first is busy: %d, want 429", r.status)
	}
}

// The class of every operation is in the document.
func TestRateLimit_classIsDocumented(t *testing.T) {
	s := limitedServer(t, "", RateLimitConfig{})
	paths := s.OpenAPI().Paths
	for path, want := range map[string]string{"/v1/contract": "contract", "/v1/unset": "create", "/v1/public": "public"} {
		if got := paths.Value(path).Post.Extensions["x-rate-class"]; got != want {
			t.Errorf("%s: x-rate-class %v, want %s", path, got, want)
		}
	}
}

func TestRateLimitConfig_validateReportsEveryError(t *testing.T) {
	err := RateLimitConfig{Contract: Limit{Rate: -1, Burst: -2}, MaxBuckets: -3}.Validate()
	for _, want := range []string{"Contract.Rate", "Contract.Burst", "MaxBuckets"} {
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
	if _, err := New(Config{RateLimit: RateLimitConfig{Read: Limit{Burst: -1}}}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("New with a bad rate limit: %v, want ErrInvalidConfig", err)
	}
}

func TestParseRateLimits_grammar(t *testing.T) {
	tests := []struct {
		in      string
		want    RateLimitConfig
		wantErr string
	}{
		{"", RateLimitConfig{}, ""},
		{"off", RateLimitConfig{Disabled: true}, ""},
		{" OFF ", RateLimitConfig{Disabled: true}, ""},
		{"contract=30000/8000, create=20", RateLimitConfig{Contract: Limit{30000, 8000}, Create: Limit{Rate: 20}}, ""},
		{"Read=0.5/1,", RateLimitConfig{Read: Limit{0.5, 1}}, ""},
		{"checkout=5", RateLimitConfig{}, "unknown class"},
		{"unset=5", RateLimitConfig{}, "unknown class"},
		{"create=5,create=6", RateLimitConfig{}, "given twice"},
		{"create", RateLimitConfig{}, "create=RATE[/BURST]"},
		{"create=0", RateLimitConfig{}, "positive rate"},
		{"create=fast", RateLimitConfig{}, "positive rate"},
		{"create=5/0", RateLimitConfig{}, "burst"},
		{"create=5/1.5", RateLimitConfig{}, "burst"},
	}
	for _, tt := range tests {
		got, err := ParseRateLimits(tt.in)
		switch {
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("ParseRateLimits(%q) error %v, want one containing %q", tt.in, err, tt.wantErr)
		case tt.wantErr == "" && err != nil:
			t.Errorf("ParseRateLimits(%q): %v", tt.in, err)
		case tt.wantErr == "" && got != tt.want:
			t.Errorf("ParseRateLimits(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

// String lists what differs from the defaults, in the grammar
// ParseRateLimits reads back.
func TestRateLimitConfig_stringListsWhatDiffersFromTheDefaults(t *testing.T) {
	for _, tt := range []struct {
		c    RateLimitConfig
		want string
	}{
		{RateLimitConfig{}, ""},
		{RateLimitConfig{Contract: DefaultContractLimit}, ""},
		{RateLimitConfig{Disabled: true, Create: Limit{Rate: 1}}, "off"},
		{RateLimitConfig{Create: Limit{Rate: 20}, Admin: Limit{Burst: 7}}, "create=20/500,admin=20/7"},
	} {
		got := tt.c.String()
		if got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.c, got, tt.want)
		}
		back, err := ParseRateLimits(got)
		if err != nil || back.WithDefaults() != tt.c.WithDefaults() && !tt.c.Disabled {
			t.Errorf("ParseRateLimits(%q) = %+v, %v; want %+v", got, back, err, tt.c)
		}
	}
}
