// Package otel sets up OpenTelemetry for dropstream: providers configured
// from the OTEL_* variables, a Prometheus /metrics handler, an slog handler
// adding trace ids, and the shared instrument and attribute names. Import
// it as dsotel. By default nothing is exported.
package otel

import (
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

// Validate reports control characters or surrounding white space in
// ServiceName or ServiceVersion.
func (c Config) Validate() error {
	return errors.Join(checkName("ServiceName", c.ServiceName), checkName("ServiceVersion", c.ServiceVersion))
}

func checkName(field, s string) error {
	if strings.TrimSpace(s) != s {
		return fmt.Errorf("otel: %s: %q has leading or trailing white space", field, s)
	}
	if strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return fmt.Errorf("otel: %s: %q contains a control character", field, s)
	}
	return nil
}
