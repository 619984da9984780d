package collector_test

import (
	"context"
	"strings"
	"testing"

	"github.com/dropstream/dropstream/collector"
	"github.com/dropstream/dropstream/collector/provider"
	"github.com/dropstream/dropstream/collector/simulator"
	"github.com/dropstream/dropstream/internal/egress/egresstest"
)

// A source on a service that does not speak HTTP, or redirecting to a URL
// with a secret in its query, fails with a class: neither the service's
// banner nor the redirect's target is read back through its run, its
// health or its transition.
func TestCollector_failedRunReadsBackNoBannerNorRedirect(t *testing.T) {
	for name, base := range map[string]func(t *testing.T) string{
		"banner":   func(t *testing.T) string { return egresstest.BannerServer(t) },
		"redirect": func(t *testing.T) string { return egresstest.RedirectServer(t, "http://10.0.0.1/private") },
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, simulator.Config{}, collector.CollectorConfig{DownAfter: 1})
			src := e.source("s", provider.Resy, scopeA)
			src.BaseURL = base(t)
			e.upsert(src)
			if err := e.c.PollOnce(context.Background(), "s"); err != nil {
				t.Fatal(err)
			}
			runs := e.runs()
			h, _ := e.c.Health("s")
			trs := e.transitions()
			if len(runs) != 1 || len(trs) != 1 || h.LastError == "" {
				t.Fatalf("runs %+v, transitions %d, health error %q; want one failed run, the source down", runs, len(trs), h.LastError)
			}
			for what, text := range map[string]string{"run error": runs[0].Error, "health last error": h.LastError,
				"transition error": trs[0].Entity.Attrs["error"]} {
				for _, secret := range []string{"SSH-2.0", "secret-banner", egresstest.RedirectSecret, "10.0.0.1", "malformed HTTP"} {
					if strings.Contains(text, secret) {
						t.Errorf("%s %q reads back %q", what, text, secret)
					}
				}
			}
		})
	}
}
