// Package fuzz sends an API server, for every operation of its OpenAPI
// document, requests the document refuses (wrong types, out-of-range
// numbers, unicode and control characters, oversized and deeply nested
// bodies, missing required fields, bad path and query parameters) within a
// time budget, and reports every answer that breaks the server's promises:
// a 5xx, a 4xx without the JSON error envelope, an exchange that does not
// match the document, or stored state changed by a refused request.
//
// A run is reproducible: the same seed against the same server makes the
// same choices in the same order (the budget decides how many requests;
// ids the server generates, taken from its answers, differ between runs).
package fuzz

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Environment variables read by ConfigFromEnv.
const (
	// EnvBudget is the time budget of a run, a Go duration ("10m").
	EnvBudget = "DROPSTREAM_FUZZ_BUDGET"
	// EnvSeed is the seed of a run, an integer.
	EnvSeed = "DROPSTREAM_FUZZ_SEED"
)

// Defaults of Config.
const (
	// DefaultBudget keeps a run inside the test suite's time.
	DefaultBudget = 30 * time.Second
	// DefaultSeed is the seed of a run when none is given.
	DefaultSeed = 1
	// DefaultBodyLimit is the server's body limit assumed when none is
	// given (api.DefaultBodyLimit).
	DefaultBodyLimit = 1 << 20
	// DefaultListEvery: the list routes are read once every 8 refused
	// or GET requests, and after every other accepted one.
	DefaultListEvery = 8
	// DefaultHeadLimit is the HTTP server's read buffer (fasthttp's
	// default): a longer request head is refused.
	DefaultHeadLimit = 4096
	// DefaultRequestTimeout bounds one request.
	DefaultRequestTimeout = 10 * time.Second
	// MaxFailures bounds the failures a run reports (the first of each
	// kind and operation).
	MaxFailures = 200
)

// Config is a fuzz run's configuration. Zero values take the defaults.
type Config struct {
	// Budget bounds the run's time. Default DefaultBudget.
	Budget time.Duration
	// Seed chooses the requests. Default DefaultSeed.
	Seed int64
	// Headers are sent with every request (an API key).
	Headers map[string]string
	// Redis, when set, is the server's store: its keyspace is compared
	// before and after each refused request.
	Redis redis.UniversalClient
	// DigestKeys compares the keyspace by a digest of every key before
	// and after each request instead of following its keyspace events
	// (slower; the only way with a Redis Cluster).
	DigestKeys bool
	// Volatile are patterns (path.Match syntax) of keys a refused
	// request may change by design: counters, metrics, rate limits.
	Volatile []string
	// AllowedServerErrors are the envelope codes of 5xx answers that are
	// the documented outcome of the set-up under test ("not_configured"
	// for routes over a backend the server does not have).
	AllowedServerErrors []string
	// OutcomeCodes are the envelope codes of 4xx answers that report an
	// operation's outcome rather than refuse its input: the operation ran
	// and may have stored its record (a checkout that failed and was
	// compensated), so the stored state is not compared.
	OutcomeCodes []string
	// Skip reports operations not to send (streaming routes whose answer
	// never ends). Operations whose success answer is text/event-stream
	// are always skipped.
	Skip func(method, path string) bool
	// BodyLimit is the server's request body limit: an oversized body is
	// larger. Default DefaultBodyLimit.
	BodyLimit int
	// RequestTimeout bounds one request. Default DefaultRequestTimeout.
	RequestTimeout time.Duration
	// ListEvery is how many refused (or GET) requests in a row share one
	// check of the list routes' answers (each refused request's Redis
	// writes are checked alone). Default DefaultListEvery.
	ListEvery int
	// HeadLimit is the size of a request head the server may refuse by
	// closing the connection (431 sent, perhaps lost). Default
	// DefaultHeadLimit.
	HeadLimit int
}

// ConfigFromEnv returns a Config with Budget and Seed from EnvBudget and
// EnvSeed when set; a malformed value is an error.
func ConfigFromEnv() (Config, error) {
	var cfg Config
	var errs []error
	if v := os.Getenv(EnvBudget); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", EnvBudget, v, err))
		}
		cfg.Budget = d
	}
	if v := os.Getenv(EnvSeed); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", EnvSeed, v, err))
		}
		cfg.Seed = n
	}
	return cfg, errors.Join(errs...)
}

// WithDefaults returns c with its zero values replaced by the defaults.
func (c Config) WithDefaults() Config {
	c.Budget = cmp.Or(c.Budget, DefaultBudget)
	c.Seed = cmp.Or(c.Seed, DefaultSeed)
	c.BodyLimit = cmp.Or(c.BodyLimit, DefaultBodyLimit)
	c.RequestTimeout = cmp.Or(c.RequestTimeout, DefaultRequestTimeout)
	c.ListEvery = cmp.Or(c.ListEvery, DefaultListEvery)
	c.HeadLimit = cmp.Or(c.HeadLimit, DefaultHeadLimit)
	return c
}

// Validate reports every invalid field.
func (c Config) Validate() error {
	var errs []error
	if c.Budget < 0 {
		errs = append(errs, fmt.Errorf("fuzz: budget %s is negative", c.Budget))
	}
	if c.BodyLimit < 0 {
		errs = append(errs, fmt.Errorf("fuzz: body limit %d is negative", c.BodyLimit))
	}
	if c.ListEvery < 0 {
		errs = append(errs, fmt.Errorf("fuzz: list every %d is negative", c.ListEvery))
	}
	if c.RequestTimeout < 0 {
		errs = append(errs, fmt.Errorf("fuzz: request timeout %s is negative", c.RequestTimeout))
	}
	return errors.Join(errs...)
}
