package main

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/api/apitest"
	"github.com/dropstream/dropstream/api/apitest/fuzz"
	"github.com/dropstream/dropstream/flows/checkout"
	"github.com/dropstream/dropstream/flows/offer"
	"github.com/dropstream/dropstream/internal/testenv"
)

// TestOpenAPIFuzz_everyOperationRefusesBadInputCleanly sends the binary's
// API, every flow's routes registered over a real Redis, requests derived
// from /openapi.json that the document refuses, within a time budget
// (fuzz.EnvBudget, default 30s; fuzz.EnvSeed chooses the requests),
// and fails on any 5xx, any 4xx without the error envelope, any exchange
// the document does not describe, and any refused request that changed
// the stored state.
func TestOpenAPIFuzz_everyOperationRefusesBadInputCleanly(t *testing.T) {
	cfg, err := fuzz.ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	// The budget is shared by an open server and one with keys (every
	// request sent with an admin key), so the keyed one's checks run too.
	if cfg.Budget == 0 {
		cfg.Budget = fuzz.DefaultBudget
	}
	cfg.Budget /= 2
	for _, tc := range []struct {
		name    string
		keys    string
		headers map[string]string
	}{
		{"open", "", nil},
		{"keyed", "fuzz-admin:admin", map[string]string{"Authorization": "Bearer fuzz-admin"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, keys, headers := cfg, tc.keys, tc.headers
			// No stage runs: a checkout call gives its saga up quickly.
			redisURL := testenv.RedisURL(t)
			a, srv := binaryApp(t, func(c *Config) { c.RedisURL, c.APIKeys = redisURL, keys }, map[string]string{checkout.VarTimeout: "200ms"})
			// The flows' demo data gives the fuzz real resources (ids in paths,
			// values such as providers and kinds in bodies, stored objects as the
			// bases of bodies). Each flow's seeding is bounded in time.
			for _, f := range a.flows {
				if f.desc.Demo == nil {
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				err := f.desc.Demo(ctx)
				cancel()
				t.Logf("demo data of %s: %v", f.def.Name, err)
			}
			// The offers are seeded beside the API: fuzz once all are in, so
			// that the stored state moves only with the fuzz's requests.
			deadline := time.Now().Add(30 * time.Second)
			for {
				res := apitest.Request(t, srv, http.MethodGet, "/v1/offers?limit=1000", nil, api.HeaderAPIKey, "fuzz-admin")
				var page struct{ Items []json.RawMessage }
				if res.Status == http.StatusOK && json.Unmarshal(res.Body, &page) == nil && len(page.Items) == offer.DemoOffers {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the demo's %d offers are not all in: %d %s", offer.DemoOffers, res.Status, res.Body)
				}
				time.Sleep(50 * time.Millisecond)
			}
			cfg.Redis = a.rdb
			cfg.Headers = headers
			cfg.BodyLimit = api.DefaultBodyLimit
			// Without ClickHouse the statistics routes answer 503 not_configured.
			cfg.AllowedServerErrors = []string{api.CodeNotConfigured}
			// A checkout the saga gave up is compensated and recorded: 400
			// checkout_failed is its outcome, not a refused input.
			cfg.OutcomeCodes = []string{"checkout_failed"}
			report := fuzz.Run(t, srv, cfg)
			t.Logf("fuzz: %d operations, %d requests (%d refused), %d failures", report.Operations, report.Requests, report.Refused, len(report.Failures))
			for _, f := range report.Failures {
				t.Error(f)
			}

		})
	}
}
