package deploy

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/dropstream/dropstream/internal/testenv"
)

// TestPrometheus_configAndRulesPassPromtool runs Prometheus' own checks: the
// configuration (with its rule files), the alert rules, and the rules'
// unit tests in alerts_test.yml.
func TestPrometheus_configAndRulesPassPromtool(t *testing.T) {
	promtool := testenv.Promtool(t)
	for _, args := range [][]string{
		{"check", "config", "prometheus/prometheus.yml"},
		{"check", "rules", "prometheus/alerts.yml"},
		{"test", "rules", "prometheus/alerts_test.yml"},
	} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

var (
	alertRe   = regexp.MustCompile(`(?m)^\s*- alert: (\S+)`)
	runbookRe = regexp.MustCompile(`runbook: "docs/operating\.md#([a-z0-9-]+)"`)
)

// TestPrometheus_everyAlertHasARunbookAndATest checks that each alert links
// a runbook section that exists in docs/operating.md, is exercised by
// alerts_test.yml, and queries only metrics the code exports.
func TestPrometheus_everyAlertHasARunbookAndATest(t *testing.T) {
	rules := readFile(t, "prometheus/alerts.yml")
	tests := readFile(t, "prometheus/alerts_test.yml")
	guide := readFile(t, "../docs/operating.md")
	alerts := alertRe.FindAllStringSubmatch(rules, -1)
	runbooks := runbookRe.FindAllStringSubmatch(rules, -1)
	if len(alerts) == 0 || len(alerts) != len(runbooks) {
		t.Fatalf("%d alerts and %d runbook links in alerts.yml: want one link per alert", len(alerts), len(runbooks))
	}
	for i, a := range alerts {
		name, anchor := a[1], runbooks[i][1]
		if anchor != strings.ToLower(name) {
			t.Errorf("alert %s links runbook #%s, want #%s", name, anchor, strings.ToLower(name))
		}
		if !strings.Contains(guide, "\n### "+name+"\n") {
			t.Errorf("alert %s: docs/operating.md has no section \"### %s\"", name, name)
		}
		if !strings.Contains(tests, "alertname: "+name+"\n") {
			t.Errorf("alert %s is not unit-tested in alerts_test.yml", name)
		}
	}
	for _, m := range metricRe.FindAllString(rules, -1) {
		if _, ok := exportedMetrics[m]; !ok {
			t.Errorf("alerts.yml queries %s, which the code does not export (see exportedMetrics)", m)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var (
	composeImageRe = regexp.MustCompile(`(?m)^\s*image:\s*(\S+)`)
	jaegerImageRe  = regexp.MustCompile(`(?m)^# compose image: (\S+)$`)
	promtoolVerRe  = regexp.MustCompile(`version (\d+\.\d+)\.`)
)

// TestCompose_runsTheJaegerAndPrometheusTheTestsRun checks that the compose
// stack names the Jaeger that scripts/jaeger.sh builds for the tests, and a
// Prometheus of the version the tests run.
func TestCompose_runsTheJaegerAndPrometheusTheTestsRun(t *testing.T) {
	images := map[string]bool{}
	for _, m := range composeImageRe.FindAllStringSubmatch(readFile(t, "../compose.yaml"), -1) {
		images[m[1]] = true
	}
	jaeger := jaegerImageRe.FindStringSubmatch(readFile(t, "../scripts/jaeger.sh"))
	if jaeger == nil || !images[jaeger[1]] {
		t.Errorf("compose.yaml does not run the Jaeger image scripts/jaeger.sh names (%v); images %v", jaeger, images)
	}
	out, err := exec.Command(testenv.Promtool(t), "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool --version: %v\n%s", err, out)
	}
	v := promtoolVerRe.FindStringSubmatch(string(out))
	if v == nil {
		t.Fatalf("promtool --version: no version in %q", out)
	}
	found := false
	for img := range images {
		if strings.HasPrefix(img, "prom/prometheus:v"+v[1]+".") {
			found = true
		}
	}
	if !found {
		t.Errorf("compose.yaml runs no prom/prometheus:v%s.x, the version the tests run; images %v", v[1], images)
	}
}
