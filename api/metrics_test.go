package api

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"

	dsotel "github.com/dropstream/dropstream/otel"
)

// seriesCount counts the series /metrics exposes (its non-comment lines).
func seriesCount(t *testing.T, s *Server) int {
	t.Helper()
	r := get(t, s, PathMetrics)
	if r.status != http.StatusOK {
		t.Fatalf("/metrics = %d", r.status)
	}
	n := 0
	for line := range strings.Lines(string(r.body)) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			n++
		}
	}
	return n
}

func TestMetrics_seriesBoundedWhateverHostAndPath(t *testing.T) {
	prov, err := dsotel.Setup(t.Context(), dsotel.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = prov.Shutdown(t.Context()) })
	s, _ := newTestServer(t, Config{
		APIKeys:        "reader:read",
		TracerProvider: prov.TracerProvider,
		MeterProvider:  prov.MeterProvider,
		MetricsHandler: prov.MetricsHandler(),
	})
	s.Group("/v1", ScopeRead).Get("/things/:id", func(c *fiber.Ctx) error {
		return c.JSON(map[string]string{"id": c.Params("id")})
	})

	// Each request kind once: a route answered 200, the same route refused
	// 401, and unmatched paths (404 and 405).
	send := func(host, method, path, key string) {
		t.Helper()
		req, err := http.NewRequest(method, path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		if key != "" {
			req.Header.Set(HeaderAPIKey, key)
		}
		do(t, s, req)
	}
	kinds := func(i int) {
		host := fmt.Sprintf("host-%d.example:%d", i, 1000+i)
		send(host, http.MethodGet, fmt.Sprintf("/v1/things/%d?q=%d", i, i), "reader")
		send(host, http.MethodGet, fmt.Sprintf("/v1/things/%d", i), "")
		send(host, http.MethodGet, fmt.Sprintf("/v1/things/%d", i), "wrong")
		send(host, http.MethodGet, fmt.Sprintf("/nowhere/%d/%%2e%%2e", i), "")
		send(host, http.MethodPost, fmt.Sprintf("/v1/things/%d", i), "reader")
	}
	kinds(0)
	seriesCount(t, s) // the scrape counter's own series
	before := seriesCount(t, s)

	for i := 1; i <= 1000; i++ {
		kinds(i)
	}
	if after := seriesCount(t, s); after != before {
		t.Errorf("/metrics has %d series after 1000 distinct hosts and paths, want %d as before", after, before)
	}
}
