package main

import (
	"context"
	"errors"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/flows/sample"
	"github.com/dropstream/dropstream/internal/egress"
	"github.com/dropstream/dropstream/stream"
)

// parseConfig binds a Config the way every command does and parses args.
func parseConfig(t *testing.T, logFormat string, args ...string) (Config, error) {
	t.Helper()
	var c Config
	fs := flagSet("test", "test", io.Discard, &c, logFormat)
	err := fs.Parse(args)
	return c, err
}

func TestConfig_envSetsDefaultsAndFlagsOverride(t *testing.T) {
	defaults := Config{RedisWait: "off", APIAddr: ":8080", Partitions: 8, LogFormat: "json", LogLevel: "info"}
	fullEnv := map[string]string{
		"DROPSTREAM_REDIS_URL":      "redis://env:6379/0",
		"DROPSTREAM_CLICKHOUSE_DSN": "clickhouse://u:p@env:9000/db",
		"DROPSTREAM_API_ADDR":       "127.0.0.1:9999",
		"DROPSTREAM_API_KEYS":       "k1:read;k2:admin",
		"DROPSTREAM_PARTITIONS":     "16",
		"DROPSTREAM_LOG_FORMAT":     "text",
		"DROPSTREAM_LOG_LEVEL":      "debug",
		"DROPSTREAM_API_LIMITS":     "contract=100/10",
		"DROPSTREAM_REDIS_WAIT":     "1/500ms",
	}
	fromEnv := Config{RedisWait: "1/500ms", RedisURL: "redis://env:6379/0", ClickHouseDSN: "clickhouse://u:p@env:9000/db", APIAddr: "127.0.0.1:9999",
		APIKeys: "k1:read;k2:admin", Partitions: 16, LogFormat: "text", LogLevel: "debug", APILimits: "contract=100/10"}
	tests := []struct {
		name      string
		env       map[string]string
		args      []string
		logFormat string
		want      Config
	}{
		{"defaults", nil, nil, "json", defaults},
		{"demo default log format", nil, nil, "text", Config{RedisWait: "off", APIAddr: ":8080", Partitions: 8, LogFormat: "text", LogLevel: "info"}},
		{"env", fullEnv, nil, "json", fromEnv},
		{"flags without env", nil, []string{"--redis-url", "redis://flag:1/0", "--partitions", "4", "--log-level", "warn"}, "json",
			Config{RedisWait: "off", RedisURL: "redis://flag:1/0", APIAddr: ":8080", Partitions: 4, LogFormat: "json", LogLevel: "warn"}},
		{"flags override env", fullEnv, []string{
			"--redis-url", "redis://flag:1/0", "--clickhouse-dsn", "clickhouse://flag:9000/x", "--api-addr", ":7000",
			"--api-keys", "k:write", "--partitions", "2", "--log-format", "json", "--log-level", "error",
			"--api-limits", "off", "--redis-wait", "off"}, "text",
			Config{RedisWait: "off", RedisURL: "redis://flag:1/0", ClickHouseDSN: "clickhouse://flag:9000/x", APIAddr: ":7000",
				APIKeys: "k:write", Partitions: 2, LogFormat: "json", LogLevel: "error", APILimits: "off"}},
		{"flag overrides env partially", fullEnv, []string{"--partitions", "3"}, "json",
			func() Config { c := fromEnv; c.Partitions = 3; return c }()},
		{"empty env var disables the API", map[string]string{"DROPSTREAM_API_ADDR": ""}, nil, "json",
			Config{RedisWait: "off", Partitions: 8, LogFormat: "json", LogLevel: "info"}},
		{"empty flag disables the API", nil, []string{"--api-addr", ""}, "json",
			Config{RedisWait: "off", Partitions: 8, LogFormat: "json", LogLevel: "info"}},
		{"partitions env with spaces", map[string]string{"DROPSTREAM_PARTITIONS": " 32 "}, nil, "json",
			Config{RedisWait: "off", APIAddr: ":8080", Partitions: 32, LogFormat: "json", LogLevel: "info"}},
		{"sentinel URL", map[string]string{"DROPSTREAM_REDIS_URL": "redis-sentinel://:pw@s1:26379,s2:26379/mymaster?db=2"}, nil, "json",
			Config{RedisWait: "off", RedisURL: "redis-sentinel://:pw@s1:26379,s2:26379/mymaster?db=2", APIAddr: ":8080", Partitions: 8, LogFormat: "json", LogLevel: "info"}},
		{"flag fixes a bad env value", map[string]string{"DROPSTREAM_PARTITIONS": "abc"}, []string{"--partitions", "4"}, "json",
			Config{RedisWait: "off", APIAddr: ":8080", Partitions: 4, LogFormat: "json", LogLevel: "info"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			got, err := parseConfig(t, tt.logFormat, tt.args...)
			if err != nil {
				t.Fatalf("parse %q: %v", tt.args, err)
			}
			if got != tt.want {
				t.Errorf("config = %+v\nwant     %+v", got, tt.want)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("Validate() = %v, want nil", err)
			}
		})
	}
}

func TestConfig_malformedVariablesFailTheParse(t *testing.T) {
	tests := []struct{ env, value, want string }{
		{"DROPSTREAM_PARTITIONS", "eight", `DROPSTREAM_PARTITIONS="eight" is not a whole number`},
	}
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			clearEnv(t)
			t.Setenv(tt.env, tt.value)
			var c Config
			err := flagSet("test", "test", io.Discard, &c, "json").parse(nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("parse = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestConfig_validateRejectsBadValues(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want []string // substrings of the error
	}{
		{"partitions not a number", map[string]string{"DROPSTREAM_PARTITIONS": "abc"}, nil, []string{"partitions", "out of range 1..1024"}},
		{"partitions zero", map[string]string{"DROPSTREAM_PARTITIONS": "0"}, nil, []string{"partitions 0 out of range 1..1024"}},
		{"partitions too many", map[string]string{"DROPSTREAM_PARTITIONS": "5000"}, nil, []string{"partitions 5000 out of range 1..1024"}},
		{"partitions negative flag", nil, []string{"--partitions", "-1"}, []string{"partitions -1 out of range"}},
		{"log level", map[string]string{"DROPSTREAM_LOG_LEVEL": "verbose"}, nil, []string{`log level "verbose"`, "debug, info, warn or error"}},
		{"empty log level", nil, []string{"--log-level", ""}, []string{`log level ""`}},
		{"log format", map[string]string{"DROPSTREAM_LOG_FORMAT": "yaml"}, nil, []string{`log format "yaml"`, "json or text"}},
		{"log format is case sensitive", nil, []string{"--log-format", "JSON"}, []string{`log format "JSON"`}},
		{"unknown limit class", nil, []string{"--api-limits", "checkout=5"}, []string{"api limits (DROPSTREAM_API_LIMITS)", "unknown class"}},
		{"zero limit rate", map[string]string{"DROPSTREAM_API_LIMITS": "contract=0"}, nil, []string{"api limits", "positive rate"}},
		{"bad sentinel URL", map[string]string{"DROPSTREAM_REDIS_URL": "redis-sentinel://:hunter2@s1:26379"}, nil, []string{"redis URL: sentinel url", "master name"}},
		{"bad redis wait", nil, []string{"--redis-url", "redis://r:1/0", "--redis-wait", "1/5s"}, []string{"DROPSTREAM_REDIS_WAIT", "out of range 1ms..2s"}},
		{"redis wait on Redis Cluster", nil, []string{"--redis-url", "n1:1,n2:2", "--redis-wait", "1/1s"}, []string{"DROPSTREAM_REDIS_WAIT 1/1s", "not the embedded Redis nor Redis Cluster"}},
		{"redis wait on the embedded Redis", map[string]string{"DROPSTREAM_REDIS_WAIT": "1/1s"}, nil, []string{"needs one primary with replicas"}},
		{"every error reported", map[string]string{"DROPSTREAM_PARTITIONS": "0", "DROPSTREAM_LOG_FORMAT": "yaml", "DROPSTREAM_LOG_LEVEL": "loud"}, nil,
			[]string{"partitions 0", `log format "yaml"`, `log level "loud"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			c, err := parseConfig(t, "json", tt.args...)
			if err != nil {
				t.Fatalf("parse %q: %v", tt.args, err)
			}
			err = c.Validate()
			if err == nil {
				t.Fatalf("Validate(%+v) = nil, want an error", c)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestConfig_validateAcceptsEveryLevel(t *testing.T) {
	for _, level := range []string{"debug", "info", "warn", "error", "WARN"} {
		c := Config{Partitions: 1, LogFormat: "text", LogLevel: level}
		if err := c.Validate(); err != nil {
			t.Errorf("Validate(level %q) = %v, want nil", level, err)
		}
	}
	if err := (Config{Partitions: stream.MaxPartitions, LogFormat: "json", LogLevel: "info"}).Validate(); err != nil {
		t.Errorf("Validate(MaxPartitions) = %v, want nil", err)
	}
}

func sampleStages(t *testing.T) map[string]stream.Stage {
	t.Helper()
	f, err := sample.New(context.Background(), flow.Deps{Settings: flow.Settings{Partitions: 2}})
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]stream.Stage{}
	for _, s := range f.Describe().Stages {
		all[s.Name] = s
	}
	return all
}

func stageNames(stages []stream.Stage) []string {
	out := make([]string, 0, len(stages))
	for _, s := range stages {
		out = append(out, s.Name)
	}
	return out
}

// services is a service registry for pick.
var services = map[string]func(context.Context) error{"svc": func(context.Context) error { return nil }}

func TestPick_selectsStagesByName(t *testing.T) {
	all := sampleStages(t)
	tests := []struct {
		names string
		want  []string
	}{
		{"", []string{"sample-enrich", "sample-sink"}},
		{"all", []string{"sample-enrich", "sample-sink"}},
		{"svc,sample-sink", []string{"sample-sink"}},
		{"sample-sink", []string{"sample-sink"}},
		{"sample-sink,sample-enrich", []string{"sample-sink", "sample-enrich"}},
		{" sample-enrich , sample-sink ", []string{"sample-enrich", "sample-sink"}},
		{"none", []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.names, func(t *testing.T) {
			got, svcs, err := pick(all, services, tt.names)
			if err != nil {
				t.Fatalf("pick(%q) = %v", tt.names, err)
			}
			if wantSvc := tt.names == "" || tt.names == "all" || strings.HasPrefix(tt.names, "svc"); (len(svcs) == 1) != wantSvc {
				t.Errorf("pick(%q) services = %v, want svc: %v", tt.names, svcs, wantSvc)
			}
			if names := stageNames(got); !reflect.DeepEqual(names, tt.want) {
				t.Errorf("pick(%q) = %v, want %v", tt.names, names, tt.want)
			}
			for _, s := range got {
				if s.Handler == nil || s.Topic.Partitions != 2 {
					t.Errorf("stage %s not the registered one: %+v", s.Name, s.Topic)
				}
			}
		})
	}
}

func TestPick_unknownStageListsKnownOnes(t *testing.T) {
	all := sampleStages(t)
	for _, names := range []string{"nope", "sample-enrich,nope", "sample-sink,", "ALL"} {
		t.Run(names, func(t *testing.T) {
			got, _, err := pick(all, services, names)
			if err == nil {
				t.Fatalf("pick(%q) = %v, want an error", names, stageNames(got))
			}
			if !strings.Contains(err.Error(), "unknown stage") || !strings.Contains(err.Error(), "known: sample-enrich, sample-sink, svc") {
				t.Errorf("pick(%q) error = %q, want it to name the unknown stage and list the known ones", names, err)
			}
		})
	}
}

// Every environment variable the notifier reads is listed by
// `dropstream --help`.
func TestUsage_listsNotifierVariables(t *testing.T) {
	var out strings.Builder
	if err := dispatch(context.Background(), []string{"--help"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"DROPSTREAM_PUBLIC_URL", "DROPSTREAM_SMTP_ADDR", "DROPSTREAM_SMTP_FROM", "DROPSTREAM_SMTP_USERNAME", "DROPSTREAM_SMTP_PASSWORD"} {
		if !strings.Contains(out.String(), "  "+v+"\n") {
			t.Errorf("--help does not list %s:\n%s", v, out.String())
		}
	}
}

func TestRoleOf_namesTheProcessByItsStages(t *testing.T) {
	tests := []struct{ stages, role, service string }{
		{"all", "", "dropstream"},
		{"", "", "dropstream"},
		{"avail-collector", "avail-collector", "dropstream-avail-collector"},
		{"avail-diff, avail-projection,avail-notifier", "avail", "dropstream-avail"},
		{"avail-diff,checkout-stock", "", "dropstream"},
		{"none", "api", "dropstream-api"},
	}
	for _, tc := range tests {
		role := roleOf(tc.stages)
		if role != tc.role || (Config{Role: role}).serviceName() != tc.service {
			t.Errorf("roleOf(%q) = %q (service %q), want %q (%q)", tc.stages, role, (Config{Role: role}).serviceName(), tc.role, tc.service)
		}
	}
}

// DROPSTREAM_EGRESS_ALLOW is read once into the settings' egress policy;
// a bad entry fails the start, naming the variable and the entry; unset,
// the policy denies the internal ranges.
func TestReadSettings_egressAllowList(t *testing.T) {
	cfg := Config{APIAddr: ":8080", Partitions: 8}
	clearEnv(t)
	s, err := readSettingsWith(cfg, nil, os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Egress.CheckURL("http://169.254.169.254/"); !errors.Is(err, egress.ErrDenied) {
		t.Errorf("default policy: link-local %v, want ErrDenied", err)
	}
	t.Setenv("DROPSTREAM_EGRESS_ALLOW", "10.1.0.0/16, feeds.internal ,127.0.0.1:9000")
	if s, err = readSettingsWith(cfg, nil, os.LookupEnv); err != nil {
		t.Fatal(err)
	}
	for u, allowed := range map[string]bool{"http://10.1.2.3/": true, "http://10.2.0.1/": false, "http://127.0.0.1:9000/x": true,
		"http://127.0.0.1:9001/x": false, "http://169.254.169.254/": false} {
		if err := s.Egress.CheckURL(u); (err == nil) != allowed {
			t.Errorf("CheckURL(%s) = %v, want allowed %v", u, err, allowed)
		}
	}
	t.Setenv("DROPSTREAM_EGRESS_ALLOW", "10.0.0.0/99,ok.example")
	if _, err := readSettingsWith(cfg, nil, os.LookupEnv); err == nil || !strings.Contains(err.Error(), "DROPSTREAM_EGRESS_ALLOW") ||
		!strings.Contains(err.Error(), "10.0.0.0/99") {
		t.Errorf("readSettings with a bad entry = %v, want an error naming the variable and the entry", err)
	}
	var out strings.Builder
	if err := dispatch(context.Background(), []string{"--help"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "  DROPSTREAM_EGRESS_ALLOW\n") {
		t.Errorf("--help does not list DROPSTREAM_EGRESS_ALLOW")
	}
}

func TestInstanceID_hostnamePlaceholder(t *testing.T) {
	host := func() (string, error) { return "c0ffee", nil }
	noHost := func() (string, error) { return "", errors.New("no host name") }
	tests := []struct {
		name     string
		instance string
		hostname func() (string, error)
		want     string
		wantErr  bool
	}{
		{"empty", "", noHost, "", false},
		{"fixed", "diff", noHost, "diff", false},
		{"placeholder", "diff-{hostname}", host, "diff-c0ffee", false},
		{"placeholder without a host name", "diff-{hostname}", noHost, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := instanceID(tc.instance, tc.hostname)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("instanceID(%q) = %q, %v; want %q, error %v", tc.instance, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// A bench's header names every setting that differs from the binary's
// defaults, whether a variable or a flag set it, and hides secrets.
func TestFlags_benchSettingsNameWhatDiffersFromTheDefaults(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"defaults", nil, nil, "settings: the binary's defaults\n"},
		{"a variable, a flag and a secret", map[string]string{"DROPSTREAM_PARTITIONS": "4", "DROPSTREAM_API_KEYS": "k:write"},
			[]string{"--api-limits", "off", "--limiter", "on,off"},
			"settings differing from the binary's defaults: --api-keys=(set) --api-limits=off --limiter=on,off --partitions=4\n"},
		{"a flag given its default", nil, []string{"--partitions", "8", "--limiter", "on"}, "settings: the binary's defaults\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var c Config
			fs := flagSet("test", "test", io.Discard, &c, "json")
			fs.String("limiter", "on", "a bench's own flag")
			if err := fs.parse(tt.args); err != nil {
				t.Fatal(err)
			}
			if got := fs.benchSettings(); got != tt.want {
				t.Errorf("benchSettings() = %q, want %q", got, tt.want)
			}
		})
	}
}
