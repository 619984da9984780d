// Package testenv gives tests real servers: a Redis URL, private redis-server
// processes that can be killed and restarted, and a fresh ClickHouse database.
//
// The servers come from the environment set by scripts/testenv.sh (which
// `make test` and CI use):
//
//	DROPSTREAM_TEST_REDIS_URL       redis://127.0.0.1:PORT/0 of a shared redis-server
//	DROPSTREAM_TEST_CLICKHOUSE_DSN  clickhouse://default:@127.0.0.1:PORT/default
//	DROPSTREAM_TEST_REDIS_SERVER    path of the redis-server binary for StartRedis
//	DROPSTREAM_TEST_REDIS_SENTINEL  path of the redis-sentinel binary for StartRedisSentinel
//	DROPSTREAM_TEST_PROMTOOL        path of promtool, for checks of Prometheus rules
//	DROPSTREAM_TEST_CHROMIUM        path of chromium, for the console's browser tests
//	DROPSTREAM_TEST_REQUIRE         "1": a missing server fails the test instead of skipping it
//
// When a server is missing, tests are skipped with a hint to run `make test`,
// unless DROPSTREAM_TEST_REQUIRE=1 or CI=true, where they fail.
//
// Waiting for asynchronous outcomes in tests is done with WaitFor, which polls
// a condition; tests never sleep to synchronize.
package testenv

import (
	"fmt"
	"net"
	"os"
	"testing"
	"time"
)

// Names of the environment variables read by this package.
const (
	// EnvRedisURL is the URL of a running redis-server shared by the tests.
	EnvRedisURL = "DROPSTREAM_TEST_REDIS_URL"
	// EnvClickHouseDSN is the native-protocol DSN of a running clickhouse-server.
	EnvClickHouseDSN = "DROPSTREAM_TEST_CLICKHOUSE_DSN"
	// EnvRedisServer is the path of the redis-server binary used by StartRedis.
	EnvRedisServer = "DROPSTREAM_TEST_REDIS_SERVER"
	// EnvPromtool is the path of Prometheus' promtool.
	EnvPromtool = "DROPSTREAM_TEST_PROMTOOL"
	// EnvRequire set to "1" makes a missing server a test failure, not a skip.
	EnvRequire = "DROPSTREAM_TEST_REQUIRE"
)

// pollInterval is how often WaitFor and the readiness checks poll.
const pollInterval = 5 * time.Millisecond

// Required reports whether missing servers must fail tests rather than skip
// them: DROPSTREAM_TEST_REQUIRE=1 or CI=true.
func Required() bool {
	return os.Getenv(EnvRequire) == "1" || os.Getenv("CI") == "true"
}

// missing fails the test when Required, and skips it otherwise. what says
// which server is missing and why.
func missing(t testing.TB, what string) {
	t.Helper()
	if Required() {
		t.Fatalf("testenv: %s (required: %s=1 or CI=true)", what, EnvRequire)
	}
	t.Skipf("testenv: %s; run `make test` to get real servers", what)
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago. Another
// process may take it before the caller binds it; callers that start servers
// should retry on "address already in use". It fails the test if no port can
// be had.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// WaitFor polls cond every few milliseconds until it returns true, and fails
// the test (t.Fatalf) if it is still false after timeout. cond is called at
// least once, and once more at the deadline. msgAndArgs, if given, is a format
// string and its arguments describing what was awaited. Like t.Fatalf, WaitFor
// must be called from the goroutine running the test.
func WaitFor(t testing.TB, timeout time.Duration, cond func() bool, msgAndArgs ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			if cond() {
				return
			}
			t.Fatalf("testenv: condition not met within %v: %s", timeout, formatMsg(msgAndArgs))
		}
		<-ticker.C
	}
}

func formatMsg(msgAndArgs []any) string {
	if len(msgAndArgs) == 0 {
		return "(no message)"
	}
	if f, ok := msgAndArgs[0].(string); ok {
		return fmt.Sprintf(f, msgAndArgs[1:]...)
	}
	return fmt.Sprint(msgAndArgs...)
}
