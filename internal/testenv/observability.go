package testenv

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Names of the environment variables of the observability servers, set by
// scripts/testenv.sh.
const (
	// EnvJaegerOTLP is the base URL of Jaeger's OTLP/HTTP receiver.
	EnvJaegerOTLP = "DROPSTREAM_TEST_JAEGER_OTLP"
	// EnvJaegerQuery is the base URL of Jaeger's query API.
	EnvJaegerQuery = "DROPSTREAM_TEST_JAEGER_QUERY"
	// EnvPrometheusURL is the base URL of the test Prometheus.
	EnvPrometheusURL = "DROPSTREAM_TEST_PROMETHEUS_URL"
	// EnvPrometheusTargets is the directory of its file_sd target files.
	EnvPrometheusTargets = "DROPSTREAM_TEST_PROMETHEUS_TARGETS"
)

// Jaeger is a running Jaeger v2 (all-in-one, memory storage).
type Jaeger struct {
	// OTLP is the base URL of its OTLP/HTTP receiver: the value of
	// OTEL_EXPORTER_OTLP_ENDPOINT for a process exporting to it.
	OTLP string
	// Query is the base URL of its query API (/api/services, /api/traces…).
	Query string
}

// JaegerServer returns the Jaeger of the test environment; a missing one
// fails the test when Required and skips it otherwise.
func JaegerServer(t testing.TB) Jaeger {
	t.Helper()
	j := Jaeger{OTLP: os.Getenv(EnvJaegerOTLP), Query: os.Getenv(EnvJaegerQuery)}
	if j.OTLP == "" || j.Query == "" {
		missing(t, EnvJaegerOTLP+" or "+EnvJaegerQuery+" not set")
	}
	return j
}

// Prometheus is a running Prometheus on the project's prometheus.yml, whose
// scrape targets the tests declare.
type Prometheus struct {
	// URL is its base URL (/api/v1/query…).
	URL     string
	targets string
}

// PrometheusServer returns the Prometheus of the test environment; a
// missing one fails the test when Required and skips it otherwise.
func PrometheusServer(t testing.TB) Prometheus {
	t.Helper()
	p := Prometheus{URL: os.Getenv(EnvPrometheusURL), targets: os.Getenv(EnvPrometheusTargets)}
	if p.URL == "" || p.targets == "" {
		missing(t, EnvPrometheusURL+" or "+EnvPrometheusTargets+" not set")
	}
	return p
}

// Scrape makes Prometheus scrape /metrics of each host:port in addrs, with
// the extra labels given, until the test ends. Prometheus reads the target
// file within a second and scrapes every second.
func (p Prometheus) Scrape(t testing.TB, labels map[string]string, addrs ...string) {
	t.Helper()
	b, err := json.Marshal([]map[string]any{{"targets": addrs, "labels": labels}})
	if err != nil {
		t.Fatal(err)
	}
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	path := filepath.Join(p.targets, fmt.Sprintf("%s-%d.json", name, os.Getpid()))
	// Written aside and renamed, so Prometheus never reads half a file.
	if err := os.WriteFile(path+".tmp", b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(path) })
}
