// Package provider holds the adapters of the reservation providers the
// collector polls. An adapter knows two things about its provider: how to
// ask for the availability of one scope (an HTTP request against a
// configurable base URL) and how to turn the response body into canonical
// entities (avail.SlotKey, or avail.RestaurantKey at restaurant level).
//
// Decoders are strict about what they need and bounded in what they accept:
// the body is at most avail.MaxRawBodySize, lists and strings have limits,
// required fields must be present and well formed, and nothing may follow
// the JSON document. Fields they do not use are ignored, since providers add
// fields freely. Any violation is an error wrapping ErrMalformed that says
// where the body went wrong.
package provider

import (
	"context"
	"errors"
	"fmt"
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

// ErrMalformed is wrapped by every error reporting a response body that does
// not describe availability: invalid JSON, a missing or mistyped required
// field, a value out of its bounds, or a list too long.
var ErrMalformed = errors.New("malformed provider response")

// ErrUnknownProvider reports a provider name no adapter serves.
var ErrUnknownProvider = errors.New("unknown provider")

// Adapter polls one provider and normalizes its responses. Adapters are
// stateless and safe for concurrent use.
type Adapter interface {
	// Name is the provider name that starts every entity key built by Parse.
	Name() string
	// ValidateScope reports whether the provider can be asked for scope
	// (for example, a venue id must be numeric). scope itself is assumed to
	// have passed avail.Scope.Validate.
	ValidateScope(scope avail.Scope) error
	// NewRequest builds the request asking the provider at base (an http or
	// https URL, possibly with a path prefix) for the availability of scope.
	// It sets no credentials: the caller adds them.
	NewRequest(ctx context.Context, base string, scope avail.Scope) (*http.Request, error)
	// Parse turns a response body to a request for scope into the entities
	// it shows open, sorted by key and without duplicates: one per slot, or
	// one per venue with at least one slot when restaurantLevel is set. An
	// empty result is a valid observation (nothing open). A body that does
	// not describe availability returns an error wrapping ErrMalformed.
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
	names := make([]string, 0, len(adapters))
	for n := range adapters {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// malformed returns an error wrapping ErrMalformed, prefixed with the
// provider name and a description of what is wrong.
func malformed(provider, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrMalformed, provider, fmt.Sprintf(format, args...))
}
