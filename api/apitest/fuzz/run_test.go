package fuzz

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/api/apitest"
	"github.com/dropstream/dropstream/internal/testenv"
)

type widget struct {
	ID    string `json:"id" openapi:"readonly"`
	Name  string `json:"name"`
	Count int    `json:"count"`
}

// brokenServer serves widgets with one bug of each kind the fuzz looks
// for; fixed leaves them out.
func brokenServer(t *testing.T, fixed bool) (*api.Server, redis.UniversalClient) {
	t.Helper()
	// The fuzz under test sends a few thousand requests in its budget: a
	// write limit would answer most of them 429 before they reach the bugs.
	srv, _ := apitest.NewServer(t, api.Config{RateLimit: api.RateLimitConfig{Disabled: true}})
	rdb := testenv.Dial(t, testenv.RedisURL(t))
	var (
		mu       sync.Mutex
		attempts []widget // in memory, listed
	)
	srv.Handle(api.Operation{Method: "GET", Path: "/v1/widgets", Scope: api.ScopeRead, Response: api.Page[widget]{},
		Query: []api.Param{{Name: "limit", Type: "integer"}, {Name: "cursor"}},
		Handler: func(c *fiber.Ctx) error {
			if _, _, err := api.PageQuery(c); err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			return c.JSON(api.Page[widget]{Items: append([]widget{}, attempts...)})
		}})
	srv.Handle(api.Operation{Method: "POST", Path: "/v1/widgets", Scope: api.ScopeWrite, Body: widget{}, Response: widget{}, Status: http.StatusCreated,
		Handler: func(c *fiber.Ctx) error {
			var w widget
			if !fixed {
				// Stores before it validates.
				rdb.Incr(c.UserContext(), "widgets:attempts")
				mu.Lock()
				if len(attempts) < 3 {
					attempts = append(attempts, widget{ID: "attempt"})
				}
				mu.Unlock()
			}
			if err := api.DecodeJSON(c, &w); err != nil {
				return err
			}
			if w.Name == "" || w.Count < 1 || w.Count > 10 {
				return api.UnprocessableEntity("invalid_widget", "name required, count 1..10")
			}
			if !fixed && strings.ContainsRune(w.Name, 0) {
				return c.Status(http.StatusBadRequest).SendString("bad name")
			}
			w.ID = "w1"
			return c.Status(http.StatusCreated).JSON(w)
		}})
	srv.Handle(api.Operation{Method: "GET", Path: "/v1/widgets/:id", Scope: api.ScopeRead, Response: widget{},
		Handler: func(c *fiber.Ctx) error {
			if !fixed && strings.HasPrefix(c.Params("id"), "-") {
				panic("negative widget")
			}
			return api.NotFound("widget_not_found", "no such widget")
		}})
	return srv, rdb
}

// The fuzz finds a 5xx, a 4xx without the envelope and a refused request
// that stored something, and reports the seed; the fixed server passes.
func TestRun_findsEachKindOfBrokenPromise(t *testing.T) {
	for _, tc := range []struct{ fixed, digests bool }{{false, false}, {false, true}, {true, false}} {
		fixed := tc.fixed
		srv, rdb := brokenServer(t, fixed)
		rep := Run(t, srv, Config{Budget: 2 * time.Second, Seed: 7, Redis: rdb, DigestKeys: tc.digests})
		kinds := map[string]bool{}
		for _, f := range rep.Failures {
			kinds[f.Kind] = true
			kinds["in "+f.Operation] = true
		}
		if rep.Seed != 7 || rep.Operations != 6 || rep.Requests < rep.Operations {
			t.Errorf("report = seed %d, %d operations, %d requests", rep.Seed, rep.Operations, rep.Requests)
		}
		for _, kind := range []string{"server_error", "no_envelope", "state_changed", "in list routes"} {
			if kinds[kind] == fixed {
				t.Errorf("fixed=%v: failures of kind %s: %v (all: %v)", fixed, kind, kinds[kind], rep.Failures)
			}
		}
		if fixed && len(rep.Failures) > 0 {
			t.Errorf("the fixed server fails: %v", rep.Failures)
		}
	}
}

func TestConfigFromEnv_budgetAndSeed(t *testing.T) {
	t.Setenv(EnvBudget, "90s")
	t.Setenv(EnvSeed, "42")
	cfg, err := ConfigFromEnv()
	if err != nil || cfg.Budget != 90*time.Second || cfg.Seed != 42 {
		t.Fatalf("ConfigFromEnv = %+v, %v", cfg, err)
	}
	t.Setenv(EnvBudget, "soon")
	t.Setenv(EnvSeed, "x")
	if _, err := ConfigFromEnv(); err == nil || !strings.Contains(err.Error(), EnvBudget) || !strings.Contains(err.Error(), EnvSeed) {
		t.Fatalf("malformed values: %v", err)
	}
	if d := (Config{}).WithDefaults(); d.Budget != DefaultBudget || d.Seed != DefaultSeed || d.BodyLimit != DefaultBodyLimit {
		t.Fatalf("defaults = %+v", d)
	}
}
