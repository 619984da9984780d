// Package otel sets up OpenTelemetry for dropstream: providers configured
// from the OTEL_* variables, a Prometheus /metrics handler, an slog handler
// adding trace ids, and the shared instrument and attribute names. Import
// it as dsotel. By default nothing is exported.
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

// Config configures [Setup]; exporters come from the OTEL_* variables.
// The zero value is valid.
type Config struct {
	// ServiceName is the service.name resource attribute.
	// Default "dropstream". OTEL_SERVICE_NAME, when set, takes precedence.
	ServiceName string
	// ServiceVersion is the service.version resource attribute.
	// Default empty (attribute omitted).
	ServiceVersion string
	// Embedded reports a process on in-process miniredis (the resource
	// attribute dropstream.embedded).
	Embedded bool
}

// withDefaults returns c with empty fields replaced by their defaults.
func (c Config) withDefaults() Config {
	c.ServiceName = cmp.Or(c.ServiceName, DefaultServiceName)
	return c
}

// Validate reports control characters or surrounding white space in
// ServiceName or ServiceVersion.
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
