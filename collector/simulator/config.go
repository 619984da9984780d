package simulator

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dropstream/dropstream/internal/bounds"
	"github.com/dropstream/dropstream/internal/tick"
)

// Limits of a simulator's configuration.
const (
	// MaxVenues bounds Config.Venues.
	MaxVenues = 1000
	// MaxSlotsPerVenue bounds Config.SlotsPerVenue: slots start at 17:00
	// every 15 minutes, the last at 23:45.
	MaxSlotsPerVenue = 28
	// MaxSlots bounds the model: venues × dates × party sizes × slots.
	MaxSlots = 1 << 20
	// MaxReleases bounds Config.Releases.
	MaxReleases = 100_000
)

// Release is a date a venue releases at a scheduled time.
type Release struct {
	// Venue is the venue's numeric id (1001…); 0: every venue.
	Venue int64
	// Date is the released date, one of Config.Dates.
	Date string
	// At is when the date comes out.
	At time.Time
}

// Config describes the simulated world. The zero value is valid: every zero
// field takes its documented default.
type Config struct {
	// Seed makes the model deterministic: the same Config gives the same
	// open slots after the same number of ticks. Default 0 (a valid seed).
	Seed uint64
	// Venues is the number of venues, 1..MaxVenues, with ids 1001+i.
	// Default 4.
	Venues int
	// Dates are the days with availability, as YYYY-MM-DD. Default
	// 2026-11-20, 2026-11-21 and 2026-11-22. Other days have no slots.
	Dates []string
	// PartySizes are the party sizes with availability, each 1..50.
	// Default 2 and 4. Other sizes have no slots.
	PartySizes []int
	// SlotsPerVenue is the number of times per venue, date and party size,
	// 1..MaxSlotsPerVenue: 17:00, 17:15, and so on. Default 8.
	SlotsPerVenue int
	// OpenFraction is the fraction of slots open at tick 0, in (0, 1].
	// Default 0.5.
	OpenFraction float64
	// Churn is the fraction of the slots that are not flapping which flip
	// (open ↔ closed) at each tick, chosen at random, 0..1. Default 0.
	Churn float64
	// Flap is the fraction of all slots, chosen once at the start, that
	// toggle at every tick, 0..1. Default 0.
	Flap float64
	// AutoTick, when positive, makes Start tick the model at that interval
	// (for the demo). Default 0: the model changes only on Tick or Advance.
	AutoTick time.Duration
	// Releases hold back a venue's date until Release.At. Default none.
	Releases []Release
	// Now is the simulator's clock, read to tell whether a release is out.
	// Default time.Now.
	Now func() time.Time
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	c.Venues = cmp.Or(c.Venues, 4)
	if len(c.Dates) == 0 {
		c.Dates = []string{"2026-11-20", "2026-11-21", "2026-11-22"}
	}
	if len(c.PartySizes) == 0 {
		c.PartySizes = []int{2, 4}
	}
	c.SlotsPerVenue = cmp.Or(c.SlotsPerVenue, 8)
	c.OpenFraction = cmp.Or(c.OpenFraction, 0.5)
	c.Now = tick.Or(c.Now)
	return c
}

// Validate reports every invalid field of c once defaults are applied.
func (c Config) Validate() error {
	c = c.WithDefaults()
	var errs []error
	errs = bounds.Check(errs, "venues", c.Venues, 1, MaxVenues)
	for _, d := range c.Dates {
		if _, err := time.Parse(time.DateOnly, d); err != nil || len(d) != 10 {
			errs = append(errs, fmt.Errorf("date %q: want YYYY-MM-DD", d))
		}
	}
	if hasDuplicates(c.Dates) {
		errs = append(errs, errors.New("dates contain duplicates"))
	}
	for _, p := range c.PartySizes {
		errs = bounds.Check(errs, "party size", p, 1, 50)
	}
	if hasDuplicates(c.PartySizes) {
		errs = append(errs, errors.New("party sizes contain duplicates"))
	}
	errs = bounds.Check(errs, "slots per venue", c.SlotsPerVenue, 1, MaxSlotsPerVenue)
	if n := c.Venues * len(c.Dates) * len(c.PartySizes) * c.SlotsPerVenue; n > MaxSlots {
		errs = append(errs, fmt.Errorf("%d slots exceed %d", n, MaxSlots))
	}
	if !(c.OpenFraction > 0 && c.OpenFraction <= 1) {
		errs = append(errs, fmt.Errorf("open fraction %v out of range (0, 1]", c.OpenFraction))
	}
	if !(c.Churn >= 0 && c.Churn <= 1) || !(c.Flap >= 0 && c.Flap <= 1) {
		errs = append(errs, fmt.Errorf("churn %v and flap %v must be within 0..1", c.Churn, c.Flap))
	}
	if c.AutoTick < 0 {
		errs = append(errs, fmt.Errorf("auto tick %s is negative", c.AutoTick))
	}
	if len(c.Releases) > MaxReleases {
		errs = append(errs, fmt.Errorf("%d releases exceed %d", len(c.Releases), MaxReleases))
	}
	for i, r := range c.Releases {
		if !slices.Contains(c.Dates, r.Date) {
			errs = append(errs, fmt.Errorf("release %d: date %q is not one of the dates", i, r.Date))
		}
		if r.Venue != 0 && (r.Venue < 1001 || r.Venue > 1000+int64(c.Venues)) {
			errs = append(errs, fmt.Errorf("release %d: venue %d is not simulated", i, r.Venue))
		}
		if r.At.IsZero() {
			errs = append(errs, fmt.Errorf("release %d: no time", i))
		}
	}
	return errors.Join(errs...)
}

// hasDuplicates reports whether a value stands twice in xs.
func hasDuplicates[T cmp.Ordered](xs []T) bool {
	return len(slices.Compact(slices.Sorted(slices.Values(xs)))) < len(xs)
}
