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
