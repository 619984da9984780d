package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/api/apitest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// TestUnavailable_redisDownAnswers503AndUnready stops the Redis a server
// uses: its routes answer 503 "unavailable" with Retry-After and no trace
// of the connection error, /readyz says unready; once Redis is back both
// recover.
func TestUnavailable_redisDownAnswers503AndUnready(t *testing.T) {
	srv := testenv.StartRedis(t, testenv.RedisConfig{})
	rdb, err := stream.Dial(context.Background(), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	s, logs := apitest.NewServer(t, api.Config{Checks: []api.ReadinessCheck{
		{Name: "redis", Check: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }},
	}})
	s.Handle(api.Operation{Method: http.MethodGet, Path: "/v1/things/:id", Summary: "a thing", Tag: "test", Scope: api.ScopeRead,
		Handler: func(c *fiber.Ctx) error {
			v, err := rdb.Get(c.UserContext(), "thing:"+c.Params("id")).Result()
			if err != nil && err.Error() != "redis: nil" {
				return err
			}
			return c.JSON(map[string]string{"value": v})
		}})
	if r := apitest.Get(t, s, "/v1/things/1"); r.Status != http.StatusOK {
		t.Fatalf("with Redis up: %d %s", r.Status, r.Body)
	}

	srv.Stop()
	r := apitest.Get(t, s, "/v1/things/1")
	apitest.WantEnvelope(t, r, http.StatusServiceUnavailable, "unavailable")
	if got := r.Header.Get("Retry-After"); got != api.RetryAfterUnavailable {
		t.Errorf("Retry-After = %q, want %q", got, api.RetryAfterUnavailable)
	}
	for _, leak := range []string{"dial", "refused", "127.0.0.1", srv.Addr()} {
		if strings.Contains(string(r.Body), leak) {
			t.Errorf("503 body %s shows the connection error (%q)", r.Body, leak)
		}
	}
	if !strings.Contains(logs.String(), "a backing store is unavailable") || !strings.Contains(logs.String(), "connection refused") {
		t.Errorf("the cause was not logged:\n%s", logs)
	}
	if r := apitest.Get(t, s, "/readyz"); r.Status != http.StatusServiceUnavailable || !strings.Contains(string(r.Body), `"unready"`) {
		t.Errorf("/readyz with Redis down: %d %s, want 503 unready", r.Status, r.Body)
	}

	srv.Restart(t)
	testenv.WaitFor(t, 20*time.Second, func() bool { return apitest.Get(t, s, "/v1/things/1").Status == http.StatusOK },
		"the route never recovered once Redis was back")
	if r := apitest.Get(t, s, "/readyz"); r.Status != http.StatusOK {
		t.Errorf("/readyz with Redis back: %d %s", r.Status, r.Body)
	}
}
