package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dropstream/dropstream/internal/testenv"
)

// syncBuffer is a goroutine-safe bytes.Buffer for the output of a command
// running in the background.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// clearEnv unsets every DROPSTREAM_* variable but the DROPSTREAM_TEST_* ones
// for the test and restores them afterwards. An unset variable is not the
// same as an empty one (an empty DROPSTREAM_API_ADDR disables the API), so
// t.Setenv(name, "") would not do.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		name, value, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "DROPSTREAM_") || strings.HasPrefix(name, "DROPSTREAM_TEST_") {
			continue
		}
		if err := os.Unsetenv(name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Setenv(name, value) })
	}
}

// background is a dispatch call running in its own goroutine.
type background struct {
	cancel         context.CancelFunc
	done           chan struct{} // closed when dispatch has returned
	err            error         // dispatch's result, set before done is closed
	stdout, stderr *syncBuffer
}

// startDispatch runs dispatch(args) in the background until stop; the test's
// cleanup stops it if the test does not.
func startDispatch(t *testing.T, args ...string) *background {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b := &background{cancel: cancel, done: make(chan struct{}), stdout: &syncBuffer{}, stderr: &syncBuffer{}}
	go func() {
		defer close(b.done)
		b.err = dispatch(ctx, args, b.stdout, b.stderr)
	}()
	t.Cleanup(func() {
		if t.Failed() && b.exited() {
			// A command that stopped early is often why the test failed.
			t.Logf("dispatch %q returned %v before the test ended; its stderr ends with:\n%s", args, b.err, tail(b.stderr.String(), 4000))
		}
		cancel()
		select {
		case <-b.done:
		case <-time.After(15 * time.Second):
			t.Errorf("dispatch %q still running 15s after cleanup cancelled it", args)
		}
	})
	return b
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// exited reports whether dispatch has returned.
func (b *background) exited() bool {
	select {
	case <-b.done:
		return true
	default:
		return false
	}
}

// waitFor polls cond like testenv.WaitFor, but fails at once if the
// command has exited meanwhile.
func (b *background) waitFor(t *testing.T, timeout time.Duration, cond func() bool, what string) {
	t.Helper()
	testenv.WaitFor(t, timeout, func() bool {
		if b.exited() {
			t.Fatalf("command exited while waiting for %s: err=%v\nstdout:\n%s\nstderr:\n%s", what, b.err, b.stdout, b.stderr)
		}
		return cond()
	}, "%s", what)
}

// stop cancels the command and returns dispatch's result; it fails the test
// if dispatch does not return within 15s.
func (b *background) stop(t *testing.T) error {
	t.Helper()
	b.cancel()
	select {
	case <-b.done:
		return b.err
	case <-time.After(15 * time.Second):
		t.Fatalf("dispatch did not return within 15s of cancellation\nstderr:\n%s", b.stderr)
		return nil
	}
}

func TestDispatch_noArgsPrintsUsageAndFails(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := dispatch(context.Background(), nil, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "no command") {
		t.Fatalf("dispatch() = %v, want a 'no command given' error", err)
	}
	for _, want := range []string{"Usage: dropstream <command>", "demo", "run", "dlq", "bench"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("usage lacks %q:\n%s", want, stdout.String())
		}
	}
}

func TestDispatch_helpPrintsUsageOnStdout(t *testing.T) {
	for _, arg := range []string{"help", "--help", "-h"} {
		t.Run(arg, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if err := dispatch(context.Background(), []string{arg}, &stdout, &stderr); err != nil {
				t.Fatalf("dispatch(%q) = %v, want nil", arg, err)
			}
			if !strings.Contains(stdout.String(), "Usage: dropstream <command>") {
				t.Errorf("stdout lacks the usage:\n%s", stdout.String())
			}
			if stderr.Len() != 0 {
				t.Errorf("stderr not empty:\n%s", stderr.String())
			}
		})
	}
}

func TestDispatch_unknownCommandNamesIt(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := dispatch(context.Background(), []string{"frobnicate", "--x"}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), `"frobnicate"`) {
		t.Fatalf("dispatch(frobnicate) = %v, want an error naming the command", err)
	}
	if !strings.Contains(stderr.String(), "Usage: dropstream") {
		t.Errorf("usage not printed on stderr:\n%s", stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout not empty:\n%s", stdout.String())
	}
}

// flagHelp splits flag.PrintDefaults output into the text of each flag.
func flagHelp(usage string) map[string]string {
	out := map[string]string{}
	name := ""
	for _, line := range strings.Split(usage, "\n") {
		if rest, ok := strings.CutPrefix(line, "  -"); ok {
			name, _, _ = strings.Cut(rest, " ")
			out[name] = line
			continue
		}
		if name != "" {
			out[name] += "\n" + line
		}
	}
	return out
}

var commonFlagVars = map[string]string{
	"redis-url":      "DROPSTREAM_REDIS_URL",
	"clickhouse-dsn": "DROPSTREAM_CLICKHOUSE_DSN",
	"api-addr":       "DROPSTREAM_API_ADDR",
	"api-keys":       "DROPSTREAM_API_KEYS",
	"partitions":     "DROPSTREAM_PARTITIONS",
	"log-format":     "DROPSTREAM_LOG_FORMAT",
	"log-level":      "DROPSTREAM_LOG_LEVEL",
}

func TestDispatch_commandHelpListsFlagsWithVariables(t *testing.T) {
	clearEnv(t)
	tests := []struct {
		args  []string
		title string
		extra map[string]string
	}{
		{[]string{"run", "--help"}, "dropstream run", map[string]string{"stages": "DROPSTREAM_STAGES", "copies": "DROPSTREAM_COPIES"}},
		{[]string{"demo", "--help"}, "dropstream demo", map[string]string{"venues": "DROPSTREAM_DEMO_VENUES"}},
		{[]string{"dlq", "list", "--help"}, "dropstream dlq list", nil},
		{[]string{"dlq", "replay", "-h"}, "dropstream dlq replay", nil},
		{[]string{"dlq", "purge", "--help"}, "dropstream dlq purge", nil},
		{[]string{"bench", "stream", "--help"}, "dropstream bench stream", nil},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := dispatch(context.Background(), tt.args, &stdout, &stderr)
			if !errors.Is(err, flag.ErrHelp) {
				t.Fatalf("dispatch(%q) = %v, want flag.ErrHelp", tt.args, err)
			}
			if !strings.Contains(stderr.String(), "Usage: "+tt.title+" [flags]") {
				t.Errorf("stderr lacks the usage title %q:\n%s", tt.title, stderr.String())
			}
			flags := flagHelp(stderr.String())
			want := map[string]string{}
			for f, v := range commonFlagVars {
				want[f] = v
			}
			for f, v := range tt.extra {
				want[f] = v
			}
			for f, v := range want {
				text, ok := flags[f]
				if !ok {
					t.Errorf("flag -%s not listed:\n%s", f, stderr.String())
					continue
				}
				if !strings.Contains(text, "["+v+"]") {
					t.Errorf("flag -%s is not shown with [%s]:\n%s", f, v, text)
				}
			}
		})
	}
}

func TestDispatch_helpOfMultiVerbCommandsSucceeds(t *testing.T) {
	for _, args := range [][]string{{"dlq", "--help"}, {"dlq", "-h"}, {"bench", "--help"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if err := dispatch(context.Background(), args, &stdout, &stderr); err != nil {
				t.Fatalf("dispatch(%q) = %v, want nil", args, err)
			}
			if !strings.Contains(stderr.String(), "Usage: dropstream "+args[0]) {
				t.Errorf("stderr lacks the usage:\n%s", stderr.String())
			}
		})
	}
}

func TestDispatch_missingVerbFails(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"dlq"}, "dlq needs list, replay or purge"},
		{[]string{"dlq", "show"}, "dlq needs list, replay or purge"},
		{[]string{"bench"}, "bench needs a target"},
		{[]string{"bench", "redis"}, "bench needs a target"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := dispatch(context.Background(), tt.args, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("dispatch(%q) = %v, want error containing %q", tt.args, err, tt.want)
			}
			if !strings.Contains(stderr.String(), "Usage: dropstream "+tt.args[0]) {
				t.Errorf("stderr lacks the usage:\n%s", stderr.String())
			}
		})
	}
}

// Bad configuration is rejected before anything is started or dialled.
func TestDispatch_invalidConfigFailsBeforeStarting(t *testing.T) {
	clearEnv(t)
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"run partitions flag", nil, []string{"run", "--partitions", "0"}, "partitions 0 out of range 1..1024"},
		{"run partitions env", map[string]string{"DROPSTREAM_PARTITIONS": "5000"}, []string{"run"}, "partitions 5000 out of range"},
		{"run copies", nil, []string{"run", "--copies", "0"}, "copies 0 out of range 1..64"},
		{"run log level", nil, []string{"run", "--log-level", "loud"}, `log level "loud"`},
		{"demo venues", nil, []string{"demo", "--venues", "0"}, "venues 0"},
		{"demo status-every", nil, []string{"demo", "--status-every", "0s"}, "status-every 0s"},
		{"demo log format", map[string]string{"DROPSTREAM_LOG_FORMAT": "xml"}, []string{"demo"}, `log format "xml"`},
		{"dlq partitions", nil, []string{"dlq", "list", "--topic", "sample.ticks", "--partitions", "-2"}, "partitions -2 out of range"},
		{"bad flag value", nil, []string{"run", "--partitions", "many"}, "invalid value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := dispatch(ctx, tt.args, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("dispatch(%q) = %v, want error containing %q", tt.args, err, tt.want)
			}
		})
	}
}
