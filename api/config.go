package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Defaults applied by [New] to zero-valued [Config] fields.
const (
	DefaultAddr            = ":8080"
	DefaultBodyLimit       = 1 << 20 // 1 MiB
	DefaultReadTimeout     = 10 * time.Second
	DefaultWriteTimeout    = 10 * time.Second
	DefaultIdleTimeout     = 60 * time.Second
	DefaultReadyTimeout    = 2 * time.Second
	DefaultShutdownTimeout = 10 * time.Second
)

// ErrInvalidConfig is wrapped by every error returned by [Config.Validate]
// and by [New] for a bad configuration.
var ErrInvalidConfig = errors.New("api: invalid config")

// ReadinessCheck is one dependency probed by GET /readyz.
type ReadinessCheck struct {
	// Name identifies the dependency in /readyz; required and unique.
	Name string
	// Check returns nil when the dependency is usable, within ctx's
	// deadline. Its error text is public (/readyz): no secrets in it.
	Check func(ctx context.Context) error
}

// Config configures a [Server]. The zero value is valid: every field has a
// default (Default*, otel's globals, slog.Default), and an empty APIKeys
// leaves the API open.
type Config struct {
	// Addr is the TCP listen address of [Server.Listen].
	Addr string
	// BodyLimit is the largest request body in bytes; larger ones get 413.
	BodyLimit int
	// ReadTimeout bounds reading a request, WriteTimeout writing a
	// response, IdleTimeout a keep-alive connection's wait, ReadyTimeout
	// GET /readyz and ShutdownTimeout the graceful shutdown.
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	ReadyTimeout, ShutdownTimeout          time.Duration

	// APIKeys lists the API keys as ValidateAPIKeys reads them. Empty: the
	// API is open.
	APIKeys string

	// Logger receives the access log, errors and panics.
	Logger         *slog.Logger
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	// Propagator carries the trace context. Default W3C Trace Context plus
	// Baggage (otel's global propagates nothing until set).
	Propagator propagation.TextMapPropagator
	// MetricsHandler serves GET /metrics without a key. Nil: no route.
	MetricsHandler http.Handler
	// Checks are run by GET /readyz. None: always ready.
	Checks []ReadinessCheck
	// RateLimit limits each caller's requests per route class.
	RateLimit RateLimitConfig
}

// validate checks c and returns the parsed API keys.
func (c Config) validate() (keyring, error) {
	if c.Addr != "" {
		if _, _, err := net.SplitHostPort(c.Addr); err != nil {
			return keyring{}, fmt.Errorf("%w: Addr %q: %w", ErrInvalidConfig, c.Addr, err)
		}
	}
	if c.BodyLimit < 0 {
		return keyring{}, fmt.Errorf("%w: BodyLimit %d is negative", ErrInvalidConfig, c.BodyLimit)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"ReadTimeout", c.ReadTimeout}, {"WriteTimeout", c.WriteTimeout}, {"IdleTimeout", c.IdleTimeout},
		{"ReadyTimeout", c.ReadyTimeout}, {"ShutdownTimeout", c.ShutdownTimeout}} {
		if d.v < 0 {
			return keyring{}, fmt.Errorf("%w: %s %v is negative", ErrInvalidConfig, d.name, d.v)
		}
	}
	seen := make(map[string]bool, len(c.Checks))
	for i, chk := range c.Checks {
		switch {
		case chk.Name == "":
			return keyring{}, fmt.Errorf("%w: Checks[%d] has no name", ErrInvalidConfig, i)
		case seen[chk.Name]:
			return keyring{}, fmt.Errorf("%w: Checks[%d]: duplicate name %q", ErrInvalidConfig, i, chk.Name)
		case chk.Check == nil:
			return keyring{}, fmt.Errorf("%w: Checks[%d] %q has a nil Check", ErrInvalidConfig, i, chk.Name)
		}
		seen[chk.Name] = true
	}
	if err := c.RateLimit.Validate(); err != nil {
		return keyring{}, err
	}
	keys, err := parseAPIKeys(c.APIKeys)
	if err != nil {
		return keyring{}, fmt.Errorf("%w: APIKeys: %w", ErrInvalidConfig, err)
	}
	return keys, nil
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	c.Addr = cmp.Or(c.Addr, DefaultAddr)
	c.BodyLimit = cmp.Or(c.BodyLimit, DefaultBodyLimit)
	c.ReadTimeout = cmp.Or(c.ReadTimeout, DefaultReadTimeout)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, DefaultWriteTimeout)
	c.IdleTimeout = cmp.Or(c.IdleTimeout, DefaultIdleTimeout)
	c.ReadyTimeout = cmp.Or(c.ReadyTimeout, DefaultReadyTimeout)
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, DefaultShutdownTimeout)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.TracerProvider = cmp.Or(c.TracerProvider, otel.GetTracerProvider())
	c.MeterProvider = cmp.Or(c.MeterProvider, otel.GetMeterProvider())
	c.RateLimit = c.RateLimit.WithDefaults()
	c.Propagator = cmp.Or(c.Propagator, propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return c
}
