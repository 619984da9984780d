// Package simulator is a reservation provider for tests and the demo: a
// seeded model of venues and slots served over the Resy- and
// OpenTable-style APIs, changed only on Tick or Advance (or AutoTick).
package simulator

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dropstream/dropstream/avail"
)

// Venue is one simulated venue.
type Venue struct {
	// ID is the venue's numeric provider id, 1001 + its index.
	ID int64
	// Name is the venue's display name.
	Name string
}

// Slot is one open slot of the model.
type Slot struct {
	Venue     Venue
	Date      string // YYYY-MM-DD
	Time      string // HH:MM
	PartySize int
	// Type is the seating type served as the Resy config.type.
	Type string
}

var venueNames = []string{"Harbor & Vine", "Copper Lantern", "Saltgrass", "Little Orchard",
	"Blue Fennel", "Maison Ardoise", "Ember Room", "Juniper Hall", "The Quiet Fig", "Olive & Ash"}

var seatingTypes = []string{"Dining Room", "Bar", "Patio"}

// Simulator is the model and its HTTP handler. Its methods are safe for
// concurrent use.
type Simulator struct {
	cfg    Config
	venues []Venue
	dates  map[string]int
	sizes  map[int]int

	mu       sync.Mutex
	rng      *rand.Rand
	open     []bool
	stable   []int // indices of slots that are not flapping, shuffled by churn
	flapping []int // indices of slots that toggle every tick
	// releases holds, by venue index and date index, when the date comes
	// out for the venue; absent: out from the start.
	releases map[[2]int]time.Time
}

// New builds the model at tick 0.
func New(cfg Config) (*Simulator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("simulator: %w", err)
	}
	cfg = cfg.WithDefaults()
	s := &Simulator{cfg: cfg, dates: map[string]int{}, sizes: map[int]int{}, releases: map[[2]int]time.Time{},
		rng: rand.New(rand.NewPCG(cfg.Seed, 0x9e3779b97f4a7c15))}
	for i := range cfg.Venues {
		name := venueNames[i%len(venueNames)]
		if i >= len(venueNames) {
			name += " " + strconv.Itoa(i/len(venueNames)+1)
		}
		s.venues = append(s.venues, Venue{ID: 1001 + int64(i), Name: name})
	}
	for i, d := range cfg.Dates {
		s.dates[d] = i
	}
	for i, p := range cfg.PartySizes {
		s.sizes[p] = i
	}
	for _, r := range cfg.Releases {
		for vi, v := range s.venues {
			if r.Venue == 0 || r.Venue == v.ID {
				s.releases[[2]int{vi, s.dates[r.Date]}] = r.At
			}
		}
	}
	n := cfg.Venues * len(cfg.Dates) * len(cfg.PartySizes) * cfg.SlotsPerVenue
	s.open = make([]bool, n)
	for i := range s.open {
		s.open[i] = s.rng.Float64() < cfg.OpenFraction
	}
	order := s.rng.Perm(n)
	nFlap := int(math.Round(cfg.Flap * float64(n)))
	s.flapping = slices.Clone(order[:nFlap])
	slices.Sort(s.flapping)
	s.stable = slices.Clone(order[nFlap:])
	slices.Sort(s.stable)
	return s, nil
}

// Config returns the configuration with defaults applied.
func (s *Simulator) Config() Config { return s.cfg }

// Venues returns the simulated venues.
func (s *Simulator) Venues() []Venue { return slices.Clone(s.venues) }

// Advance ticks the model n times. A tick toggles the flapping slots and
// flips round(Churn × stable slots) random others.
func (s *Simulator) Advance(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.tickLocked()
	}
}

func (s *Simulator) tickLocked() {
	for _, i := range s.flapping {
		s.open[i] = !s.open[i]
	}
	k := int(math.Round(s.cfg.Churn * float64(len(s.stable))))
	// Partial Fisher–Yates: the first k entries become a random sample.
	for j := range k {
		r := j + s.rng.IntN(len(s.stable)-j)
		s.stable[j], s.stable[r] = s.stable[r], s.stable[j]
		s.open[s.stable[j]] = !s.open[s.stable[j]]
	}
}

// index returns the position of a slot in the model.
func (s *Simulator) index(venue, date, size, slot int) int {
	return ((venue*len(s.cfg.Dates)+date)*len(s.cfg.PartySizes)+size)*s.cfg.SlotsPerVenue + slot
}

// slotTime returns the time of day of slot t: 17:00 + 15 min × t.
func slotTime(t int) string {
	m := 17*60 + 15*t
	return fmt.Sprintf("%02d:%02d", m/60, m%60)
}

// matches reports whether a venue is asked for by a venue id ("" for any)
// and a name query ("" for any; case-insensitive substring).
func matches(v Venue, venueID, query string) bool {
	if venueID != "" && venueID != strconv.FormatInt(v.ID, 10) {
		return false
	}
	return query == "" || strings.Contains(strings.ToLower(v.Name), strings.ToLower(query))
}

// venueSlots is the answer for one venue: the venue and its open slots.
type venueSlots struct {
	venue Venue
	slots []Slot
}

// lookup returns the venues matching the request with their open slots on
// date for party, in order.
func (s *Simulator) lookup(venueID, query, date string, party int) []venueSlots {
	s.mu.Lock()
	defer s.mu.Unlock()
	di, okDate := s.dates[date]
	pi, okSize := s.sizes[party]
	now := s.cfg.Now()
	var res []venueSlots
	for vi, v := range s.venues {
		if !matches(v, venueID, query) {
			continue
		}
		vs := venueSlots{venue: v}
		at, held := s.releases[[2]int{vi, di}] // see Config.Releases
		out := okDate && (!held || !now.Before(at))
		for t := 0; out && okSize && t < s.cfg.SlotsPerVenue; t++ {
			if s.open[s.index(vi, di, pi, t)] {
				vs.slots = append(vs.slots, Slot{Venue: v, Date: date, Time: slotTime(t), PartySize: party,
					Type: seatingTypes[(vi+t)%len(seatingTypes)]})
			}
		}
		res = append(res, vs)
	}
	return res
}

// OpenSlots returns the slots open now in scope (venue, date, party size and
// name query), in venue and time order.
func (s *Simulator) OpenSlots(scope avail.Scope) []Slot {
	var out []Slot
	for _, vs := range s.lookup(scope.Venue, scope.Query, scope.Date, scope.PartySize) {
		out = append(out, vs.slots...)
	}
	return out
}

// Open returns the canonical keys (avail.SlotKey) of the slots open now in
// scope, as an adapter for provider would build them, sorted.
func (s *Simulator) Open(provider string, scope avail.Scope) []string {
	keys := []string{}
	for _, sl := range s.OpenSlots(scope) {
		keys = append(keys, avail.SlotKey(provider, strconv.FormatInt(sl.Venue.ID, 10), sl.Date, sl.Time, sl.PartySize))
	}
	slices.Sort(keys)
	return keys
}
