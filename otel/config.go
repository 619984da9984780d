// Package otel sets up OpenTelemetry for dropstream: tracer and meter
// providers configured from the standard OTEL_* environment variables, a
// Prometheus /metrics handler, W3C trace-context propagation through stream
// entry fields, an slog handler that stamps trace_id/span_id on log records,
// and the instrument and attribute names shared by the whole project.
//
// The package name collides with go.opentelemetry.io/otel; import it as
//
//	dsotel "github.com/dropstream/dropstream/otel"
//
// Nothing is exported by default: with no OTEL_* variables set, spans are
// recorded (so trace ids exist for logs and propagation) but not exported, and
// metrics are only served by [Providers.MetricsHandler].
package otel

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// DefaultServiceName is the service.name used when Config.ServiceName is empty
// and OTEL_SERVICE_NAME is unset.
const DefaultServiceName = "dropstream"

// Config configures [Setup]. The zero value is valid.
//
// Exporters are not configured here but through the standard environment
// variables (OTEL_TRACES_EXPORTER, OTEL_METRICS_EXPORTER,
// OTEL_EXPORTER_OTLP_*, OTEL_TRACES_SAMPLER, OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES, ...); see [Setup].
type Config struct {
	// ServiceName is the service.name resource attribute.
	// Default "dropstream". OTEL_SERVICE_NAME, when set, takes precedence.
	ServiceName string
	// ServiceVersion is the service.version resource attribute.
	// Default empty (attribute omitted).
	ServiceVersion string
	// Embedded reports that the process runs against in-process miniredis.
	// It is recorded as the resource attribute dropstream.embedded. It does
	// not change exporter defaults: nothing is exported unless OTEL_*
	// variables ask for it, in every mode. Default false.
	Embedded bool
}

// withDefaults returns c with empty fields replaced by their defaults.
func (c Config) withDefaults() Config {
	c.ServiceName = cmp.Or(c.ServiceName, DefaultServiceName)
	return c
}

// Validate reports whether c is usable: ServiceName and ServiceVersion must
// not have leading or trailing white space nor contain control characters.
// Empty fields are valid (they take their defaults).
func (c Config) Validate() error {
	var errs []error
	if err := checkName(c.ServiceName); err != nil {
		errs = append(errs, fmt.Errorf("otel: ServiceName: %w", err))
	}
	if err := checkName(c.ServiceVersion); err != nil {
		errs = append(errs, fmt.Errorf("otel: ServiceVersion: %w", err))
	}
	return errors.Join(errs...)
}

func checkName(s string) error {
	if strings.TrimSpace(s) != s {
		return fmt.Errorf("%q has leading or trailing white space", s)
	}
	if strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return fmt.Errorf("%q contains a control character", s)
	}
	return nil
}
