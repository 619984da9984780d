package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// mainArgsVar, when set, makes the test binary run main with these
// arguments (separated by spaces) instead of the tests: the way the tests
// below run the command as a process, exit status included.
const mainArgsVar = "DROPSTREAM_TEST_MAIN_ARGS"

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(mainArgsVar); ok {
		os.Args = append([]string{"dropstream"}, strings.Fields(args)...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runMain runs the command as a process with args and, of the DROPSTREAM_*
// variables, only env. It returns its exit code and stderr; a process still
// running after a minute is killed and fails the test.
func runMain(t *testing.T, env map[string]string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DROPSTREAM_") || strings.HasPrefix(kv, "DROPSTREAM_TEST_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, mainArgsVar+"="+strings.Join(args, " "))
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("dropstream %q still running a minute later, killed:\n%s", args, stderr.String())
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run dropstream %q: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

// A bad configuration stops the process at once, before any stage or the
// API starts, with a non-zero status and the reason; a password or key in
// the bad value is not repeated.
func TestMain_invalidConfigExitsAtOnceWithTheReason(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"unknown scope", map[string]string{"DROPSTREAM_API_KEYS": "k1secret:read;k2secret:sudo"},
			`api keys (DROPSTREAM_API_KEYS): entry 2: unknown scope "sudo"`},
		{"duplicate key", map[string]string{"DROPSTREAM_API_KEYS": "k1secret:read;k1secret:write"},
			"api keys (DROPSTREAM_API_KEYS): entry 2: duplicate key (same as entry 1)"},
		{"redis URL scheme", map[string]string{"DROPSTREAM_REDIS_URL": "http://user:k1secret@localhost:6379"},
			"redis URL: redis: invalid URL scheme: http"},
		{"redis URL port", map[string]string{"DROPSTREAM_REDIS_URL": "redis://:k1secret@localhost:port"},
			"redis URL: "},
		{"redis cluster address", map[string]string{"DROPSTREAM_REDIS_URL": "localhost:7000,k1secret"},
			"redis URL: cluster address 2: want host:port"},
		{"clickhouse URL", map[string]string{"DROPSTREAM_CLICKHOUSE_DSN": "https://u:k1secret@localhost:8123/db"},
			`clickhouse: DSN scheme "https"`},
		{"api address", map[string]string{"DROPSTREAM_API_ADDR": "8080"}, `api address "8080"`},
		{"flow duration", map[string]string{"DROPSTREAM_CHECKOUT_TIMEOUT": "soon"},
			`DROPSTREAM_CHECKOUT_TIMEOUT="soon": want a positive duration`},
		{"flow URL", map[string]string{"DROPSTREAM_PUBLIC_URL": "ftp://example.com"},
			"DROPSTREAM_PUBLIC_URL"},
		{"guard share", map[string]string{"DROPSTREAM_AVAIL_GUARD_SHARE": "2"},
			"flow avail: DROPSTREAM_AVAIL_GUARD_MIN, DROPSTREAM_AVAIL_GUARD_SHARE: diff: guard {Min:10 Share:2}: want min ≥ 0 and share in 0..1"},
	}
	for _, cmd := range []string{"demo", "run"} {
		for _, tt := range tests {
			t.Run(cmd+" "+tt.name, func(t *testing.T) {
				env := map[string]string{"DROPSTREAM_API_ADDR": "127.0.0.1:0"}
				for k, v := range tt.env {
					env[k] = v
				}
				code, stderr := runMain(t, env, cmd)
				if code != 1 {
					t.Errorf("exit status %d, want 1\n%s", code, stderr)
				}
				if !strings.Contains(stderr, "dropstream: "+tt.want) {
					t.Errorf("stderr lacks %q:\n%s", "dropstream: "+tt.want, stderr)
				}
				for _, started := range []string{"stage started", "listening", "k1secret"} {
					if strings.Contains(stderr, started) {
						t.Errorf("stderr has %q:\n%s", started, stderr)
					}
				}
			})
		}
	}
}

// --help shows which variables are set, never their secret values.
func TestDispatch_helpNeverShowsSecrets(t *testing.T) {
	clearEnv(t)
	secrets := map[string]string{
		"DROPSTREAM_API_KEYS":       "apikeysecret1:read;apikeysecret2:admin",
		"DROPSTREAM_REDIS_URL":      "rediss://default:redispassword@redis.example:6380/0",
		"DROPSTREAM_CLICKHOUSE_DSN": "clickhouse://writer:chpassword@ch.example:9000/db?password=querypassword",
		"DROPSTREAM_SMTP_PASSWORD":  "smtppassword",
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	for _, args := range [][]string{{"--help"}, {"run", "--help"}, {"demo", "--help"}, {"dlq", "list", "--help"},
		{"migrate", "--help"}, {"bench", "stream", "--help"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if err := dispatch(context.Background(), args, &stdout, &stderr); err != nil && !errors.Is(err, flag.ErrHelp) {
				t.Fatalf("dispatch(%q) = %v", args, err)
			}
			out := stdout.String() + stderr.String()
			if !strings.Contains(out, "Usage: dropstream") {
				t.Fatalf("no usage printed:\n%s", out)
			}
			for _, secret := range []string{"apikeysecret", "redispassword", "chpassword", "querypassword", "smtppassword"} {
				if strings.Contains(out, secret) {
					t.Errorf("--help shows %q:\n%s", secret, out)
				}
			}
			if len(args) > 1 && !strings.Contains(out, "redis.example:6380") {
				t.Errorf("--help hides the Redis host too, want only its password hidden:\n%s", out)
			}
		})
	}
}
