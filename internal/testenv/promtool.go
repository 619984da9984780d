package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// Promtool returns the path of Prometheus' promtool: $DROPSTREAM_TEST_PROMTOOL,
// else promtool on PATH. A missing promtool fails the test when Required
// and skips it otherwise.
func Promtool(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(EnvPromtool); p != "" {
		return p
	}
	p, err := exec.LookPath("promtool")
	if err != nil {
		missing(t, "promtool not found ("+EnvPromtool+" unset and not on PATH)")
	}
	return p
}
