package collector

import (
	"errors"

	"github.com/dropstream/dropstream/collector/provider"
)

var (
	// ErrInvalidSource is wrapped by every error of Source.Validate and of
	// decoding a source.
	ErrInvalidSource = errors.New("invalid source")
	// ErrSourceNotFound reports a source id that is not known.
	ErrSourceNotFound = errors.New("source not found")
	// ErrSourceTaken reports a source id another tenant's source holds.
	ErrSourceTaken = errors.New("source id taken")
	// ErrAuthExpired reports a source paused because its provider refused its
	// credentials (401, 403) until its configuration changes.
	ErrAuthExpired = errors.New("source credentials expired")
	// ErrMalformed is wrapped by errors reporting a provider response that
	// does not describe availability (see provider.ErrMalformed).
	ErrMalformed = provider.ErrMalformed
)
