package flow

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/egress"
	"github.com/dropstream/dropstream/internal/quota"
	"github.com/dropstream/dropstream/stream"
)

// Kind is the type of a Var's value.
type Kind int

// The kinds of Var. The zero Kind is String.
const (
	String   Kind = iota // any text.
	Duration             // a positive Go duration ("30s", "5m").
	Int                  // a positive whole number.
	URL                  // an absolute http or https URL, kept without a trailing slash.
	Bool                 // true or false (strconv.ParseBool: also 1/0, t/f).
)

// Var is an environment variable a flow reads, checked against its Kind at
// start and listed by `dropstream --help`.
type Var struct {
	// Name is the variable, DROPSTREAM_*.
	Name string
	// Default is the value when the variable is unset or empty; "" means
	// unset (a zero value for the getters).
	Default string
	// Usage says what it sets, for --help.
	Usage string
	// Kind is the type its value must have. Default String.
	Kind Kind
	// Secret hides the value in --help and in logs.
	Secret bool
}

// kindChecks are the checks of the kinds other than String, and what each
// wants.
var kindChecks = map[Kind]struct {
	ok   func(string) bool
	want string
}{
	Duration: {func(s string) bool { d, err := time.ParseDuration(s); return err == nil && d > 0 }, "a positive duration such as 30s"},
	Int:      {func(s string) bool { n, err := strconv.Atoi(s); return err == nil && n >= 1 }, "a positive whole number"},
	URL: {func(s string) bool {
		u, err := url.Parse(s)
		return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
	}, "an absolute http or https URL"},
	Bool: {func(s string) bool { _, err := strconv.ParseBool(s); return err == nil }, "true or false"},
}

// Check reports whether value is valid for the variable's kind; "" is
// always valid (unset).
func (v Var) Check(value string) error {
	if k, ok := kindChecks[v.Kind]; ok && value != "" && !k.ok(value) {
		if v.Secret {
			value = "(secret)"
		}
		return fmt.Errorf("%s=%q: want %s", v.Name, value, k.want)
	}
	return nil
}

// Settings are the configuration the app gives every flow: shared settings
// and the values of every Definition's Vars.
type Settings struct {
	// Partitions is the stream partitions per flow (DROPSTREAM_PARTITIONS).
	Partitions int
	// PublicURL is the base of links in messages, without a trailing slash
	// (DROPSTREAM_PUBLIC_URL; default from the API address).
	PublicURL string
	// APIAddr is the API's listen address; empty when there is no API.
	APIAddr string
	// Egress is the policy of a flow's outbound connections; nil is the
	// default policy.
	Egress *egress.Policy
	// RedisWait is how many replicas must hold a write a caller is
	// answered on before the answer (DROPSTREAM_REDIS_WAIT; default off).
	RedisWait stream.ReplicaWait
	// vars are the values of the declared variables, defaults applied.
	vars map[string]string
}

// EgressPolicy returns the egress policy, a new default one when Egress
// nil.
func (s Settings) EgressPolicy() *egress.Policy { return cmp.Or(s.Egress, egress.Default()) }

// DefaultPublicURL is the public URL for an API listening on ":8080".
const DefaultPublicURL = "http://localhost:8080"

// PublicURLFor is the default public URL of an API at addr
// (DefaultPublicURL for none).
func PublicURLFor(addr string) string {
	switch {
	case addr == "":
		return DefaultPublicURL
	case strings.HasPrefix(addr, ":"):
		return "http://localhost" + addr
	default:
		return "http://" + addr
	}
}

// ReadVars reads, defaults and checks every declared variable through
// lookup; it reports every bad value and conflicting declaration.
func ReadVars(vars []Var, lookup func(string) (string, bool)) (map[string]string, error) {
	out := map[string]string{}
	declared := map[string]Var{}
	var errs []error
	for _, v := range vars {
		if prev, dup := declared[v.Name]; dup {
			if prev != v {
				errs = append(errs, fmt.Errorf("%s declared twice with different meanings", v.Name))
			}
			continue
		}
		declared[v.Name] = v
		value, _ := lookup(v.Name)
		value = cmp.Or(strings.TrimSpace(value), v.Default)
		if err := v.Check(value); err != nil {
			errs = append(errs, err)
			continue
		}
		if v.Kind == URL {
			value = strings.TrimRight(value, "/")
		}
		out[v.Name] = value
	}
	return out, errors.Join(errs...)
}

// WithVars returns s holding the values ReadVars returned.
func (s Settings) WithVars(values map[string]string) Settings {
	s.vars = values
	return s
}

// String returns a variable's value, "" when unset or not declared.
func (s Settings) String(name string) string { return s.vars[name] }

// Duration returns a Duration variable's value, 0 when unset.
func (s Settings) Duration(name string) time.Duration {
	d, _ := time.ParseDuration(s.vars[name])
	return d
}

// Quota returns the per-caller cap of records of kind set by the Int
// variable name, or nil when it is 0 or unset.
func (s Settings) Quota(rdb redis.UniversalClient, name, kind string) (*quota.Quota, error) {
	q, err := quota.Optional(rdb, kind, s.Int(name))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return q, nil
}

// Int returns an Int variable's value, 0 when unset.
func (s Settings) Int(name string) int {
	n, _ := strconv.Atoi(s.vars[name])
	return n
}

// Bool returns a Bool variable's value, false when unset.
func (s Settings) Bool(name string) bool {
	b, _ := strconv.ParseBool(s.vars[name])
	return b
}
