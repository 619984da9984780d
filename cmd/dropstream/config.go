package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/dropstream/dropstream/stream"
)

// Config is the process configuration: each field comes from a DROPSTREAM_*
// variable and is overridden by the flag of the same meaning.
type Config struct {
	// RedisURL is a redis:// or rediss:// URL, or host:port,... for
	// Redis Cluster. Empty: an embedded in-process Redis.
	RedisURL string
	// ClickHouseDSN is clickhouse://user:pass@host:9000/db. Empty: no
	// analytics; /readyz does not check it.
	ClickHouseDSN string
	// APIAddr is the API's listen address; empty disables the API. Default ":8080".
	APIAddr string
	// APIKeys is "key:scope,scope;key2:scope"; empty leaves the API open.
	APIKeys string
	// Partitions per flow, fixed for a deployment. Default 8.
	Partitions int
	// LogFormat is json or text. Default json (text in demo).
	LogFormat string
	// LogLevel is debug, info, warn or error. Default info.
	LogLevel string
}

// flags is a flag set whose defaults may come from DROPSTREAM_* variables.
type flags struct {
	*flag.FlagSet
	envErrs map[string]error // by flag name: malformed variables
}

// parse parses args and reports malformed variables of flags not given.
func (f *flags) parse(args []string) error {
	if err := f.Parse(args); err != nil {
		return err
	}
	f.Visit(func(fl *flag.Flag) { delete(f.envErrs, fl.Name) })
	var errs []error
	for _, err := range f.envErrs {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// flagSet binds the common configuration to a new flag set whose usage
// lists every flag with its variable.
func flagSet(name, summary string, stderr io.Writer, c *Config, logFormat string) *flags {
	fs := &flags{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError), envErrs: map[string]error{}}
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: dropstream %s [flags]\n\n%s\n\nFlags (each also set by the variable in brackets):\n", name, summary)
		fs.PrintDefaults()
	}
	envString(fs, &c.RedisURL, "redis-url", "DROPSTREAM_REDIS_URL", "", "Redis URL (redis://, rediss://) or host:port,... for Redis Cluster; empty starts an embedded Redis")
	envString(fs, &c.ClickHouseDSN, "clickhouse-dsn", "DROPSTREAM_CLICKHOUSE_DSN", "", "ClickHouse DSN clickhouse://user:pass@host:9000/db; empty disables analytics")
	envString(fs, &c.APIAddr, "api-addr", "DROPSTREAM_API_ADDR", ":8080", "API listen address; empty disables the API")
	envString(fs, &c.APIKeys, "api-keys", "DROPSTREAM_API_KEYS", "", "API keys as key:scope,scope;key2:scope (scopes read, write, admin); empty leaves the API open")
	envInt(fs, &c.Partitions, "partitions", "DROPSTREAM_PARTITIONS", 8, "stream partitions per flow, fixed for a deployment")
	envString(fs, &c.LogFormat, "log-format", "DROPSTREAM_LOG_FORMAT", logFormat, "log format: json or text")
	envString(fs, &c.LogLevel, "log-level", "DROPSTREAM_LOG_LEVEL", "info", "log level: debug, info, warn, error")
	return fs
}

// envVar documents an environment variable read by a flow rather than
// bound to a flag; `dropstream --help` lists them.
type envVar struct {
	name, def, usage string
}

// flowVariables are the environment variables flows read, listed by
// `dropstream --help`.
var flowVariables = []envVar{
	{"DROPSTREAM_PUBLIC_URL", "http://localhost:8080", "base URL of the links in notifications (opt-in, unsubscribe)"},
	{"DROPSTREAM_SMTP_ADDR", "", "SMTP server host:port of the notifier's email channel (STARTTLS required); empty: no email channel"},
	{"DROPSTREAM_SMTP_FROM", "", "sender address of notification emails (required with DROPSTREAM_SMTP_ADDR)"},
	{"DROPSTREAM_SMTP_USERNAME", "", "SMTP AUTH PLAIN user name; empty: no authentication"},
	{"DROPSTREAM_SMTP_PASSWORD", "", "SMTP AUTH password"},
	{"DROPSTREAM_NOTIFIER_MAX_IN_FLIGHT", "64", "notifier: sends in flight at once per notifier-deliver copy; a copy sends at most this many ÷ the receivers' answer time per second"},
	{"DROPSTREAM_COMIC_NOTIFY_URL", "", "comic flow: POST /notify URL for subscriptions without their own; empty: such notifications go to the log channel"},
	{"DROPSTREAM_COMIC_NOTIFY_SECRET", "", "comic flow: HMAC secret (at least 16 bytes) signing requests to DROPSTREAM_COMIC_NOTIFY_URL"},
	{"DROPSTREAM_CHECKOUT_TIMEOUT", "30s", "checkout flow: how long a checkout call waits for its saga before giving the attempt up (compensated, 400)"},
	{"DROPSTREAM_CHECKOUT_SWEEP_INTERVAL", "10s", "checkout flow: how often the checkout-sweeper service looks for attempts left open"},
	{"DROPSTREAM_CHECKOUT_SWEEP_AGE", "30s", "checkout flow: age of an open attempt whose missing commands the sweeper sends again"},
	{"DROPSTREAM_CHECKOUT_ABANDON_AGE", "5m", "checkout flow: age of a pending attempt whose silent parts the sweeper gives up and compensates"},
}

// printFlowVariables writes the flows' environment variables to w.
func printFlowVariables(w io.Writer) {
	fmt.Fprintln(w, "\nEnvironment variables read by the flows (in `run` and `demo`):")
	for _, v := range flowVariables {
		def := ""
		if v.def != "" {
			def = " (default " + v.def + ")"
		}
		fmt.Fprintf(w, "  %s\n    \t%s%s\n", v.name, v.usage, def)
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.Partitions < 1 || c.Partitions > stream.MaxPartitions {
		errs = append(errs, fmt.Errorf("partitions %d out of range 1..%d", c.Partitions, stream.MaxPartitions))
	}
	if c.LogFormat != "json" && c.LogFormat != "text" {
		errs = append(errs, fmt.Errorf("log format %q: want json or text", c.LogFormat))
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("log level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

func envString(fs *flags, p *string, name, env, def, usage string) {
	if v, ok := os.LookupEnv(env); ok {
		def = v
	}
	fs.StringVar(p, name, def, usage+" ["+env+"]")
}

// envInt binds an int flag whose default comes from env. A value of env
// that is not a whole number fails parse unless the flag is given.
func envInt(fs *flags, p *int, name, env string, def int, usage string) {
	if v, ok := os.LookupEnv(env); ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			fs.envErrs[name] = fmt.Errorf("%s=%q is not a whole number", env, v)
		}
		def = n
	}
	fs.IntVar(p, name, def, usage+" ["+env+"]")
}
