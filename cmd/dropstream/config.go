package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
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
	"github.com/dropstream/dropstream/internal/bounds"
	"github.com/dropstream/dropstream/internal/egress"
	dsotel "github.com/dropstream/dropstream/otel"
	"github.com/dropstream/dropstream/stream"
)

// Config is the process configuration: each field comes from a DROPSTREAM_*
// variable, overridden by the flag of the same meaning (see flagSet).
type Config struct {
	// RedisURL: empty starts an embedded Redis.
	RedisURL string
	// RedisWait is the replica wait of a write (stream.ParseReplicaWait).
	RedisWait string
	// ClickHouseDSN: empty disables analytics.
	ClickHouseDSN string
	// APIAddr: empty disables the API.
	APIAddr string
	// APIKeys is "key:scope,scope;key2:scope"; empty leaves the API open.
	APIKeys string
	// APILimits is read by api.ParseRateLimits; empty: the defaults.
	APILimits string
	// Partitions per flow, fixed for a deployment.
	Partitions int
	LogFormat  string
	LogLevel   string
	// Role is what the process runs, set by its command (see roleOf); the
	// traces' service is "dropstream-" + Role.
	Role string
	// Instance prefixes the consumer names; "{hostname}" stands for the
	// host's name. Empty: new consumer names every start.
	Instance    string
	PprofAddr   string
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

// roleOf returns the role of a process running the stages of list: the
// stage for one, their shared flow prefix ("avail"), "api" for "none",
// else "".
func roleOf(list string) string {
	names := splitList(list)
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

// splitList splits a comma-separated list, trimming each item and
// dropping blank ones.
func splitList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
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
	envErrs map[string]error  // by flag name: malformed variables
	builtin map[string]string // by flag name: the default before its variable
}

// changed lists "--name=value" for every flag not at the binary's default;
// a secret shows as "(set)".
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

// benchSettings is a bench header's line of the changed settings.
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
	return errors.Join(slices.Collect(maps.Values(f.envErrs))...)
}

// flagSet binds the common configuration to a new flag set.
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

// egressAllowVar is the allow list of the flows' egress policy.
var egressAllowVar = flow.Var{Name: "DROPSTREAM_EGRESS_ALLOW",
	Usage: "comma-separated CIDRs, addresses, host names and host:port pairs outbound requests (sources, feeds, webhooks, SMTP) may reach although they are loopback, link-local, private, CGNAT or multicast; empty: all of those are refused"}

// variables are every variable the flows read.
func variables() []flow.Var {
	vars := []flow.Var{publicURLVar, egressAllowVar}
	for _, d := range definitions() {
		vars = append(vars, d.Vars...)
	}
	return vars
}

// readSettingsWith reads the flows' variables, overrides winning over
// lookup; a bad value fails it.
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
	public = cmp.Or(public, flow.PublicURLFor(cfg.APIAddr))
	policy, err := egress.New(egress.Config{Allow: splitList(values[egressAllowVar.Name])})
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

// printFlowVariables writes the flows' variables to w, secrets' values
// hidden.
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

// Validate reports every problem of the configuration without connecting
// to anything. Messages never contain a password or a key.
func (c Config) Validate() error {
	errs := []error{validateRedisURL(c.RedisURL), validateRedisWait(c.RedisWait, c.RedisURL)}
	if c.ClickHouseDSN != "" {
		errs = append(errs, clickhouse.Config{DSN: c.ClickHouseDSN}.Validate())
	}
	if _, _, err := net.SplitHostPort(c.APIAddr); c.APIAddr != "" && err != nil {
		errs = append(errs, fmt.Errorf("api address %q: want host:port or :port", c.APIAddr))
	}
	errs = append(errs, validatePprofAddr(c.PprofAddr))
	if err := api.ValidateAPIKeys(c.APIKeys); err != nil {
		errs = append(errs, fmt.Errorf("api keys (DROPSTREAM_API_KEYS): %w", err))
	}
	if _, err := api.ParseRateLimits(c.APILimits); err != nil {
		errs = append(errs, fmt.Errorf("api limits (DROPSTREAM_API_LIMITS): %w", err))
	}
	errs = bounds.Check(errs, "partitions", c.Partitions, 1, stream.MaxPartitions)
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
// it. The URL is never in the error.
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

// validateRedisWait checks the replica wait, and that url names one
// primary: WAIT covers one node.
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

// secretValue is a string flag whose printed value is redacted.
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

// redactURLPassword masks a URL's password and secret-like query
// parameters; a value that does not parse is hidden.
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

// envSecret is envString for a value --help shows only through redact.
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

// envInt binds an int flag whose default comes from env; a malformed
// value fails parse unless the flag is given.
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

// rateLimits returns the parsed APILimits (checked by Validate).
func (c Config) rateLimits() api.RateLimitConfig {
	rl, _ := api.ParseRateLimits(c.APILimits)
	return rl
}
