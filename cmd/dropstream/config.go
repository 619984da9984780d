package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/internal/egress"
	dsotel "github.com/dropstream/dropstream/otel"
	"github.com/dropstream/dropstream/stream"
)

// Config is the process configuration: each field comes from a DROPSTREAM_*
// variable and is overridden by the flag of the same meaning.
type Config struct {
	// RedisURL is a redis:// or rediss:// URL, a redis-sentinel:// URL
	// (stream.ParseSentinelURL), or host:port,... for Redis Cluster.
	// Empty: an embedded in-process Redis.
	RedisURL string
	// RedisWait is how many replicas must hold a write a caller is
	// answered on, and how long to wait for them, as
	// stream.ParseReplicaWait reads it ("1/500ms"). Default "off":
	// replication stays asynchronous.
	RedisWait string
	// ClickHouseDSN is clickhouse://user:pass@host:9000/db. Empty: no
	// analytics; /readyz does not check it.
	ClickHouseDSN string
	// APIAddr is the API's listen address; empty disables the API. Default ":8080".
	APIAddr string
	// APIKeys is "key:scope,scope;key2:scope"; empty leaves the API open.
	APIKeys string
	// APILimits are the API's rate limits per route class, in the grammar
	// of api.ParseRateLimits: "off", or class=RATE[/BURST],... for the
	// classes that differ from their defaults. Empty: the defaults.
	APILimits string
	// Partitions per flow, fixed for a deployment. Default 8.
	Partitions int
	// LogFormat is json or text. Default json (text in demo).
	LogFormat string
	// LogLevel is debug, info, warn or error. Default info.
	LogLevel string
	// Role is what the process runs, set by its command (not a flag): its
	// traces' service.name is "dropstream-" + Role ("dropstream" when
	// empty) unless OTEL_SERVICE_NAME is set. See roleOf.
	Role string
	// Instance is the process's stable identity across restarts: its
	// stage copies are the consumers "<instance>-<stage>-<copy>", and a
	// restart reads their pending entries first (stream.RunnerConfig).
	// "{hostname}" in it stands for the host's name (a container's id), so
	// replicas of one compose service get ids of their own. Empty: new
	// consumer names for every process.
	Instance string
	// PprofAddr is a loopback host:port serving net/http/pprof
	// (/debug/pprof/); empty, the default, serves none.
	PprofAddr string
	// JaegerUIURL is the trace UI the console links traces to; empty: no
	// links.
	JaegerUIURL string
}

// instanceID returns the instance id with "{hostname}" replaced by the
// host's name.
func instanceID(instance string, hostname func() (string, error)) (string, error) {
	if !strings.Contains(instance, "{hostname}") {
		return instance, nil
	}
	host, err := hostname()
	if err != nil || host == "" {
		return "", fmt.Errorf("instance %q: no host name to put in it: %v", instance, err)
	}
	return strings.ReplaceAll(instance, "{hostname}", host), nil
}

// roleOf returns the role of a process running the stages of list (a
// comma list, "all" or "none"): the stage's name for one stage, the flow
// prefix ("avail" of avail-diff) when every stage shares it, "api" for
// none (a process serving the API only), else "" (a process running
// everything, or stages of several flows).
func roleOf(list string) string {
	var names []string
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	switch {
	case len(names) == 1 && names[0] == "none":
		return "api"
	case len(names) == 0 || slices.Contains(names, "all"):
		return ""
	case len(names) == 1:
		return names[0]
	}
	prefix, _, _ := strings.Cut(names[0], "-")
	for _, n := range names[1:] {
		if p, _, _ := strings.Cut(n, "-"); p != prefix {
			return ""
		}
	}
	return prefix
}

// serviceName is the service.name of the process's traces by default.
func (c Config) serviceName() string {
	if c.Role == "" {
		return dsotel.DefaultServiceName
	}
	return dsotel.DefaultServiceName + "-" + c.Role
}

// flags is a flag set whose defaults may come from DROPSTREAM_* variables.
type flags struct {
	*flag.FlagSet
	envErrs map[string]error // by flag name: malformed variables
	// builtin is the binary's default of each flag bound to a variable,
	// before the variable sets it.
	builtin map[string]string
}

// changed lists "--name=value" for every flag whose value differs from
// the binary's default, set by its variable or on the command line, in
// flag order; a secret shows as "(set)".
func (f *flags) changed() []string {
	var out []string
	f.VisitAll(func(fl *flag.Flag) {
		def, ok := f.builtin[fl.Name]
		if !ok {
			def = fl.DefValue
		}
		v := fl.Value.String()
		if sv, secret := fl.Value.(secretValue); secret {
			if v = *sv.p; v != "" {
				v = "(set)"
			}
		}
		if v != def {
			out = append(out, "--"+fl.Name+"="+v)
		}
	})
	return out
}

// benchSettings is the line of a bench's header that names every setting
// differing from the binary's defaults.
func (f *flags) benchSettings() string {
	changed := f.changed()
	if len(changed) == 0 {
		return "settings: the binary's defaults\n"
	}
	return "settings differing from the binary's defaults: " + strings.Join(changed, " ") + "\n"
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
	fs := &flags{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError), envErrs: map[string]error{}, builtin: map[string]string{}}
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: dropstream %s [flags]\n\n%s\n\nFlags (each also set by the variable in brackets):\n", name, summary)
		fs.PrintDefaults()
	}
	envSecret(fs, &c.RedisURL, "redis-url", "DROPSTREAM_REDIS_URL", redactURLPassword, "Redis `URL` (redis://, rediss://), redis-sentinel://host:port,host:port/master for a primary behind Sentinels, or host:port,... for Redis Cluster; empty starts an embedded Redis")
	envString(fs, &c.RedisWait, "redis-wait", "DROPSTREAM_REDIS_WAIT", "off", "replicas that must hold a write before its caller is answered (a checkout, a payment, a stock change), and the longest wait, as REPLICAS/TIMEOUT (1/500ms); fewer in time answers 503; off: asynchronous replication, a failover may lose the last acknowledged writes")
	envSecret(fs, &c.ClickHouseDSN, "clickhouse-dsn", "DROPSTREAM_CLICKHOUSE_DSN", redactURLPassword, "ClickHouse `DSN` clickhouse://user:pass@host:9000/db; empty disables analytics")
	envString(fs, &c.APIAddr, "api-addr", "DROPSTREAM_API_ADDR", ":8080", "API listen address; empty disables the API")
	envSecret(fs, &c.APIKeys, "api-keys", "DROPSTREAM_API_KEYS", hideAll, "API `keys` as key:scope,scope;key2:scope (scopes read, write, admin); empty leaves the API open")
	envString(fs, &c.APILimits, "api-limits", "DROPSTREAM_API_LIMITS", "", "API rate limits of one caller (API key, or client address on an open API) per route class, as class=RATE[/BURST],... for the classes that differ from their defaults (create=50/500, contract=25000/5000, change=200/1000, read=20000/10000, admin=20/100, public=200/1000), or off; empty: the defaults")
	envInt(fs, &c.Partitions, "partitions", "DROPSTREAM_PARTITIONS", 8, "stream partitions per flow, fixed for a deployment")
	envString(fs, &c.LogFormat, "log-format", "DROPSTREAM_LOG_FORMAT", logFormat, "log format: json or text")
	envString(fs, &c.LogLevel, "log-level", "DROPSTREAM_LOG_LEVEL", "info", "log level: debug, info, warn, error")
	envString(fs, &c.PprofAddr, "pprof-addr", "DROPSTREAM_PPROF_ADDR", "", "loopback host:port serving Go profiles at /debug/pprof/ (heap, goroutine, CPU); empty serves none")
	envString(fs, &c.JaegerUIURL, "jaeger-ui-url", "DROPSTREAM_JAEGER_UI_URL", "", "base `URL` of a Jaeger UI the console links each trace to (<url>/trace/<id>); empty: no links")
	envString(fs, &c.Instance, "instance", "DROPSTREAM_INSTANCE", "", "stable identity of this process across restarts, unique among live processes ({hostname} stands for the host name); empty gives new consumer names each start")
	return fs
}

// publicURLVar is the setting every flow shares for the links it sends.
var publicURLVar = flow.Var{Name: "DROPSTREAM_PUBLIC_URL", Kind: flow.URL,
	Usage: "base URL of the links in notifications (opt-in, unsubscribe, items) (default http://localhost:<port of --api-addr>)"}

// egressAllowVar is the allow list of the egress policy every flow's
// outbound connections go through.
var egressAllowVar = flow.Var{Name: "DROPSTREAM_EGRESS_ALLOW",
	Usage: "comma-separated CIDRs, addresses, host names and host:port pairs outbound requests (sources, feeds, webhooks, SMTP) may reach although they are loopback, link-local, private, CGNAT or multicast; empty: all of those are refused"}

// variables are every variable the flows read: the shared ones, then each
// definition's, in order.
func variables() []flow.Var {
	vars := []flow.Var{publicURLVar, egressAllowVar}
	for _, d := range definitions() {
		vars = append(vars, d.Vars...)
	}
	return vars
}

// readSettingsWith reads, once, every variable the flows read, overrides
// (a command's own flags) winning over lookup, and fails on a bad value.
func readSettingsWith(cfg Config, overrides map[string]string, lookup func(string) (string, bool)) (flow.Settings, error) {
	values, err := flow.ReadVars(variables(), func(name string) (string, bool) {
		if v, ok := overrides[name]; ok {
			return v, true
		}
		return lookup(name)
	})
	if err != nil {
		return flow.Settings{}, err
	}
	public := values[publicURLVar.Name]
	if public == "" {
		public = flow.PublicURLFor(cfg.APIAddr)
	}
	policy, err := egress.New(egress.Config{Allow: egress.ParseAllow(values[egressAllowVar.Name])})
	if err != nil {
		return flow.Settings{}, fmt.Errorf("%s: %w", egressAllowVar.Name, err)
	}
	wait, err := stream.ParseReplicaWait(cfg.RedisWait)
	if err != nil {
		return flow.Settings{}, fmt.Errorf("DROPSTREAM_REDIS_WAIT: %w", err)
	}
	return flow.Settings{Partitions: cfg.Partitions, PublicURL: public, APIAddr: cfg.APIAddr, Egress: policy,
		RedisWait: wait}.WithVars(values), nil
}

// printFlowVariables writes the flows' environment variables to w; a
// secret's value is never shown.
func printFlowVariables(w io.Writer) {
	fmt.Fprintln(w, "\nEnvironment variables read by the flows (in `run` and `demo`):")
	for _, v := range variables() {
		def := ""
		if v.Default != "" && !v.Secret {
			def = " (default " + v.Default + ")"
		}
		fmt.Fprintf(w, "  %s\n    \t%s%s\n", v.Name, v.Usage, def)
	}
}

// Validate checks the configuration without connecting to anything and
// reports every problem: the partitions, the log format and level, the
// Redis URL and ClickHouse DSN (their syntax), the API address and API keys
// (an unknown scope, a duplicate key). Messages never contain a password or
// a key.
func (c Config) Validate() error {
	var errs []error
	if err := validateRedisURL(c.RedisURL); err != nil {
		errs = append(errs, err)
	}
	if err := validateRedisWait(c.RedisWait, c.RedisURL); err != nil {
		errs = append(errs, err)
	}
	if c.ClickHouseDSN != "" {
		if err := (clickhouse.Config{DSN: c.ClickHouseDSN}).Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.APIAddr != "" {
		if _, _, err := net.SplitHostPort(c.APIAddr); err != nil {
			errs = append(errs, fmt.Errorf("api address %q: want host:port or :port", c.APIAddr))
		}
	}
	if err := validatePprofAddr(c.PprofAddr); err != nil {
		errs = append(errs, err)
	}
	if err := api.ValidateAPIKeys(c.APIKeys); err != nil {
		errs = append(errs, fmt.Errorf("api keys (DROPSTREAM_API_KEYS): %w", err))
	}
	if _, err := api.ParseRateLimits(c.APILimits); err != nil {
		errs = append(errs, fmt.Errorf("api limits (DROPSTREAM_API_LIMITS): %w", err))
	}
	if c.Partitions < 1 || c.Partitions > stream.MaxPartitions {
		errs = append(errs, fmt.Errorf("partitions %d out of range 1..%d", c.Partitions, stream.MaxPartitions))
	}
	if c.LogFormat != "json" && c.LogFormat != "text" {
		errs = append(errs, fmt.Errorf("log format %q: want json or text", c.LogFormat))
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	if u, err := url.Parse(c.JaegerUIURL); c.JaegerUIURL != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
		errs = append(errs, fmt.Errorf("jaeger UI URL: want an http:// or https:// URL"))
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

// validateRedisURL checks the syntax of a Redis URL as stream.Dial reads
// it: empty (embedded Redis), a redis:// or rediss:// URL, a
// redis-sentinel:// URL, or a comma list of host:port for Redis Cluster.
// The URL itself is never in the error.
func validateRedisURL(u string) error {
	switch {
	case u == "":
		return nil
	case strings.HasPrefix(u, stream.SentinelScheme+"://"):
		if _, err := stream.ParseSentinelURL(u); err != nil {
			return fmt.Errorf("redis URL: %w", err)
		}
	case strings.Contains(u, "://"):
		if _, err := redis.ParseURL(u); err != nil {
			var uerr *url.Error
			if errors.As(err, &uerr) {
				err = uerr.Err // url.Error quotes the URL, password included
			}
			return fmt.Errorf("redis URL: %w", err)
		}
	default:
		for i, addr := range strings.Split(u, ",") {
			if _, _, err := net.SplitHostPort(strings.TrimSpace(addr)); err != nil {
				return fmt.Errorf("redis URL: cluster address %d: want host:port", i+1)
			}
		}
	}
	return nil
}

// validateRedisWait checks the replica wait and that the Redis of url
// (as validateRedisURL accepts it) can honour it: one primary with
// replicas, not the embedded Redis nor Redis Cluster, where WAIT covers
// one node.
func validateRedisWait(wait, url string) error {
	w, err := stream.ParseReplicaWait(wait)
	if err != nil {
		return fmt.Errorf("DROPSTREAM_REDIS_WAIT: %w", err)
	}
	if w.On() && (url == "" || !strings.Contains(url, "://")) {
		return fmt.Errorf("DROPSTREAM_REDIS_WAIT %s: needs one primary with replicas (a redis:// or %s:// URL), not the embedded Redis nor Redis Cluster", w, stream.SentinelScheme)
	}
	return nil
}

// secretValue is a string flag whose printed value (its default in
// --help) is redacted: taken from the environment, it may hold a
// password or API keys.
type secretValue struct {
	p      *string
	redact func(string) string
}

func (v secretValue) String() string {
	if v.p == nil || *v.p == "" {
		return ""
	}
	return v.redact(*v.p)
}

func (v secretValue) Set(s string) error { *v.p = s; return nil }

// hideAll redacts a value entirely.
func hideAll(string) string { return "(set, hidden)" }

// redactURLPassword replaces the password of a URL (and query parameters
// named like a password, secret or token) by "xxxxx"; a value that
// does not parse as a URL is hidden entirely.
func redactURLPassword(s string) string {
	if !strings.Contains(s, "://") {
		if strings.Contains(s, "@") {
			return hideAll(s)
		}
		return s
	}
	u, err := url.Parse(s)
	if err != nil {
		return hideAll(s)
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "***")
	}
	q := u.Query()
	for k := range q {
		if lk := strings.ToLower(k); strings.Contains(lk, "pass") || strings.Contains(lk, "secret") || strings.Contains(lk, "token") {
			q.Set(k, "xxxxx")
		}
	}
	u.RawQuery = q.Encode()
	return u.Redacted()
}

// envSecret binds a string flag whose default comes from env, like
// envString, but whose value --help shows only through redact.
func envSecret(fs *flags, p *string, name, env string, redact func(string) string, usage string) {
	*p, _ = os.LookupEnv(env)
	fs.builtin[name] = ""
	fs.Var(secretValue{p: p, redact: redact}, name, usage+" ["+env+"]")
}

func envString(fs *flags, p *string, name, env, def, usage string) {
	fs.builtin[name] = def
	if v, ok := os.LookupEnv(env); ok {
		def = v
	}
	fs.StringVar(p, name, def, usage+" ["+env+"]")
}

// envInt binds an int flag whose default comes from env. A value of env
// that is not a whole number fails parse unless the flag is given.
func envInt(fs *flags, p *int, name, env string, def int, usage string) {
	fs.builtin[name] = strconv.Itoa(def)
	if v, ok := os.LookupEnv(env); ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			fs.envErrs[name] = fmt.Errorf("%s=%q is not a whole number", env, v)
		}
		def = n
	}
	fs.IntVar(p, name, def, usage+" ["+env+"]")
}

// rateLimits returns the API's rate limits of APILimits (checked by
// Validate).
func (c Config) rateLimits() api.RateLimitConfig {
	rl, _ := api.ParseRateLimits(c.APILimits)
	return rl
}
