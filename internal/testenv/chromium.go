package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// EnvChromium is the path of a Chromium for browser tests.
const EnvChromium = "DROPSTREAM_TEST_CHROMIUM"

// Chromium returns the path of Chromium: $DROPSTREAM_TEST_CHROMIUM, else
// chromium on PATH. A missing Chromium fails the test when Required and
// skips it otherwise.
func Chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(EnvChromium); p != "" {
		return p
	}
	p, err := exec.LookPath("chromium")
	if err != nil {
		missing(t, "chromium not found ("+EnvChromium+" unset and not on PATH)")
	}
	return p
}
