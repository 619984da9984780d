// Package provider holds the reservation providers' adapters: each builds
// a scope's request and parses the response, strictly and bounded;
// violations wrap ErrMalformed.
package provider

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"

	"github.com/dropstream/dropstream/avail"
)

// Provider names: the Provider of a source and the first part of every
// entity key an adapter builds.
const (
	// Resy speaks the Resy-style find API (GET /4/find).
	Resy = "resy"
	// OpenTable speaks the OpenTable-style GraphQL API
	// (POST /dapi/fe/gql, operation RestaurantsAvailability).
	OpenTable = "opentable"
	// Simulator speaks the Resy-style protocol to the built-in simulator
	// (collector/simulator); its entity keys start with "simulator".
	Simulator = "simulator"
)

// Limits of a decoded response, beside avail.MaxRawBodySize for the body,
// avail.MaxEntities for the entities and avail.MaxFieldLen for strings.
const (
	// MaxVenues bounds the venues (restaurants) of one response.
	MaxVenues = 10000
	// MaxSlotsPerVenue bounds the slots (times) of one venue in a response.
	MaxSlotsPerVenue = 2000
	// MaxAttrLen bounds an attribute value kept on an entity.
	MaxAttrLen = 512
)

// ErrMalformed is wrapped by every error about a response body that does
// not describe availability.
var ErrMalformed = errors.New("malformed provider response")

// ErrUnknownProvider reports a provider name no adapter serves.
var ErrUnknownProvider = errors.New("unknown provider")

// Adapter polls one provider and normalizes its responses. Adapters are
// stateless and safe for concurrent use.
type Adapter interface {
	// Name is the provider name that starts every entity key built by Parse.
	Name() string
	// ValidateScope reports whether the provider can be asked for a scope
	// that passed avail.Scope.Validate.
	ValidateScope(scope avail.Scope) error
	// NewRequest builds the request for scope at base, without
	// credentials.
	NewRequest(ctx context.Context, base string, scope avail.Scope) (*http.Request, error)
	// Parse returns the open entities a response body shows, sorted and
	// unique: slots, or venues when restaurantLevel is set.
	Parse(body []byte, scope avail.Scope, restaurantLevel bool) ([]avail.Entity, error)
}

var adapters = map[string]Adapter{
	Resy:      resyAdapter{name: Resy},
	OpenTable: openTableAdapter{},
	Simulator: resyAdapter{name: Simulator},
}

// For returns the adapter of a provider, or an error wrapping
// ErrUnknownProvider.
func For(name string) (Adapter, error) {
	a, ok := adapters[name]
	if !ok {
		return nil, fmt.Errorf("%w %q: want one of %v", ErrUnknownProvider, name, Names())
	}
	return a, nil
}

// Names returns the provider names For serves, sorted.
func Names() []string {
	return slices.Sorted(maps.Keys(adapters))
}

// malformed returns an error wrapping ErrMalformed, prefixed with the
// provider name and a description of what is wrong.
func malformed(provider, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrMalformed, provider, fmt.Sprintf(format, args...))
}
