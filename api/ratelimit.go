package api

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Class is what a route does, for its rate limit: each caller has a bucket
// per class, so one kind of request never starves another.
type Class int

// The classes.
const (
	// ClassUnset is an operation without a class (limited as ClassCreate).
	ClassUnset Class = iota
	// ClassCreate creates what the service keeps or polls for the caller.
	ClassCreate
	// ClassContract is a transactional contract (checkout, stock, payment,
	// purchase), its creations and its reads.
	ClassContract
	// ClassChange changes or deletes what a caller has.
	ClassChange
	// ClassRead reads: lists, lookups, statistics, searches.
	ClassRead
	// ClassAdmin is an operator's action (replays, purges, stage administration).
	ClassAdmin
	// ClassPublic needs no key (message links, the console, WebSub
	// deliveries); its caller is the client's address.
	ClassPublic

	numClasses = iota
)

// Classes lists every class, in order.
var Classes = []Class{ClassCreate, ClassContract, ClassChange, ClassRead, ClassAdmin, ClassPublic}

var classNames = [numClasses]string{"unset", "create", "contract", "change", "read", "admin", "public"}

// String returns the class's name as DROPSTREAM_API_LIMITS spells it.
func (c Class) String() string {
	if c < 0 || c >= numClasses {
		return "Class(" + strconv.Itoa(int(c)) + ")"
	}
	return classNames[c]
}

// effective returns the class c is limited as: ClassCreate for ClassUnset
// or an unknown value.
func (c Class) effective() Class {
	if c <= ClassUnset || c >= numClasses {
		return ClassCreate
	}
	return c
}

// Limit is a token bucket: Burst requests at once, then Rate a second.
type Limit struct {
	// Rate is the sustained requests per second.
	Rate float64
	// Burst is the most requests at once.
	Burst int
}

// Defaults of [RateLimitConfig], per class, for one caller.
var (
	// DefaultCreateLimit: 50 a second, 500 at once.
	DefaultCreateLimit = Limit{Rate: 50, Burst: 500}
	// DefaultContractLimit fits 5,000 checkouts a second of five writes.
	DefaultContractLimit = Limit{Rate: 25_000, Burst: 5_000}
	// DefaultChangeLimit: 200 a second, 1,000 at once.
	DefaultChangeLimit = Limit{Rate: 200, Burst: 1_000}
	// DefaultReadLimit stays above one process's target of 10,000 reads/s.
	DefaultReadLimit = Limit{Rate: 20_000, Burst: 10_000}
	// DefaultAdminLimit: 20 a second, 100 at once.
	DefaultAdminLimit = Limit{Rate: 20, Burst: 100}
	// DefaultPublicLimit: 200 a second, 1,000 at once, per address.
	DefaultPublicLimit = Limit{Rate: 200, Burst: 1_000}
)

// DefaultMaxBuckets bounds the buckets (caller and class) kept.
const DefaultMaxBuckets = 100_000

// RateLimitConfig limits each caller (API key, else client address) with a
// token bucket per route class; beyond it, 429 "rate_limited" with
// Retry-After. A key's own rate= and burst= replace every class's. Zero
// fields take their defaults (Default*Limit).
type RateLimitConfig struct {
	// Create limits ClassCreate and unclassed operations.
	Create Limit
	// Contract limits ClassContract.
	Contract Limit
	// Change limits ClassChange.
	Change Limit
	// Read limits ClassRead.
	Read Limit
	// Admin limits ClassAdmin.
	Admin Limit
	// Public limits ClassPublic.
	Public Limit
	// MaxBuckets bounds the buckets kept: idle ones are then forgotten, and
	// while none is, a new caller gets 429. Default 100,000.
	MaxBuckets int
	// Disabled turns every limit off.
	Disabled bool
}

// limit returns a pointer to the limit of class (see effective).
func (c *RateLimitConfig) limit(class Class) *Limit {
	return [numClasses]*Limit{ClassCreate: &c.Create, ClassContract: &c.Contract, ClassChange: &c.Change,
		ClassRead: &c.Read, ClassAdmin: &c.Admin, ClassPublic: &c.Public}[class.effective()]
}

// Of returns the limit of class, ClassCreate's for an unset class.
func (c RateLimitConfig) Of(class Class) Limit { return *c.limit(class) }

var defaultLimits = RateLimitConfig{Create: DefaultCreateLimit, Contract: DefaultContractLimit, Change: DefaultChangeLimit,
	Read: DefaultReadLimit, Admin: DefaultAdminLimit, Public: DefaultPublicLimit, MaxBuckets: DefaultMaxBuckets}

// WithDefaults returns c with every zero field set to its default.
func (c RateLimitConfig) WithDefaults() RateLimitConfig {
	for _, class := range Classes {
		l, def := c.limit(class), defaultLimits.Of(class)
		l.Rate = cmp.Or(l.Rate, def.Rate)
		l.Burst = cmp.Or(l.Burst, def.Burst)
	}
	c.MaxBuckets = cmp.Or(c.MaxBuckets, DefaultMaxBuckets)
	return c
}

// Validate reports every invalid field of c, wrapping ErrInvalidConfig;
// zero fields are valid.
func (c RateLimitConfig) Validate() error {
	var errs []error
	for _, class := range Classes {
		l := c.Of(class)
		name := strings.ToUpper(class.String()[:1]) + class.String()[1:]
		if l.Rate < 0 || math.IsNaN(l.Rate) || math.IsInf(l.Rate, 0) {
			errs = append(errs, fmt.Errorf("%w: RateLimit.%s.Rate %v: want a positive number of requests per second", ErrInvalidConfig, name, l.Rate))
		}
		if l.Burst < 0 {
			errs = append(errs, fmt.Errorf("%w: RateLimit.%s.Burst %d is negative", ErrInvalidConfig, name, l.Burst))
		}
	}
	if c.MaxBuckets < 0 {
		errs = append(errs, fmt.Errorf("%w: RateLimit.MaxBuckets %d is negative", ErrInvalidConfig, c.MaxBuckets))
	}
	return errors.Join(errs...)
}

// ParseRateLimits reads DROPSTREAM_API_LIMITS: "off", or class=RATE[/BURST],...
// for the classes that differ from their defaults.
func ParseRateLimits(s string) (RateLimitConfig, error) {
	var c RateLimitConfig
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "off") {
		c.Disabled = true
		return c, nil
	}
	seen := map[Class]bool{}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, value, ok := strings.Cut(part, "=")
		class := Class(slices.IndexFunc(classNames[:], func(n string) bool { return strings.EqualFold(strings.TrimSpace(name), n) }))
		if class <= ClassUnset {
			return RateLimitConfig{}, fmt.Errorf("%q: unknown class (want %s)", name, strings.Join(classNames[ClassCreate:], ", "))
		}
		if seen[class] {
			return RateLimitConfig{}, fmt.Errorf("%s given twice", class)
		}
		seen[class] = true
		rate, burst, hasBurst := strings.Cut(value, "/")
		l := c.limit(class)
		var err error
		if l.Rate, err = strconv.ParseFloat(strings.TrimSpace(rate), 64); !ok || err != nil || !(l.Rate > 0) || math.IsInf(l.Rate, 0) {
			return RateLimitConfig{}, fmt.Errorf("%s: want %s=RATE[/BURST] with a positive rate a second", class, class)
		}
		if hasBurst {
			if l.Burst, err = strconv.Atoi(strings.TrimSpace(burst)); err != nil || l.Burst < 1 {
				return RateLimitConfig{}, fmt.Errorf("%s: the burst after '/' must be a positive whole number", class)
			}
		}
	}
	return c, nil
}

// String returns c as [ParseRateLimits] reads it, default classes left out.
func (c RateLimitConfig) String() string {
	if c.Disabled {
		return "off"
	}
	c = c.WithDefaults()
	var parts []string
	for _, class := range Classes {
		if l := c.Of(class); l != defaultLimits.Of(class) {
			parts = append(parts, fmt.Sprintf("%s=%g/%d", class, l.Rate, l.Burst))
		}
	}
	return strings.Join(parts, ",")
}
