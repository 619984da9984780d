package diff

import (
	"fmt"
	"strconv"
	"strings"
)

// Per-venue stabilization (Input.PerVenueMaxK, WithPerVenueK): instead of
// the snapshot's k, each venue's entities stabilize after a k chosen from
// the venue's measured flap rate. A flap is a raw close of an entity whose
// raw open was still pending (not yet stable) or was made by the scope's
// previous OK run (by run_at in ms): an opening that did not hold. The
// scope keeps per venue a count of raw opens and of flaps, both halved
// (rounding down) whenever the opens exceed FlapWindow at the end of a run,
// so old behaviour fades. A run chooses each venue's k from the counts as
// they stood before it:
//
//   - fewer than MinFlapOpens raw opens: the snapshot's k (not enough seen);
//   - flaps·20 ≤ opens (at most 5% flapped): 1, an opening notifies at once;
//   - otherwise min(maxK, 2 + ⌊flaps·(maxK−1)/opens⌋): the flappier, the
//     more runs an opening must hold.
const (
	// FlapWindow bounds a venue's raw-open count: past it both counts halve.
	FlapWindow = 32
	// MinFlapOpens is the raw opens a venue needs before its flap rate
	// chooses its k.
	MinFlapOpens = 4
)

// VenueFlaps is a venue's flap record in its scope's diff state.
type VenueFlaps struct {
	// Opens counts raw opens and Flaps the flaps among them, decayed.
	Opens, Flaps int
}

// venueK returns the k of a venue with flap record c (ok: it has one)
// under per-venue stabilization of at most maxK, and k the snapshot's.
func venueK(c VenueFlaps, ok bool, k, maxK int) int {
	switch {
	case !ok || c.Opens < MinFlapOpens:
		return k
	case c.Flaps*20 <= c.Opens:
		return 1
	default:
		return min(maxK, 2+c.Flaps*(maxK-1)/c.Opens)
	}
}

// decay halves a record whose opens exceed FlapWindow.
func (c VenueFlaps) decay() VenueFlaps {
	for c.Opens > FlapWindow {
		c.Opens, c.Flaps = c.Opens/2, c.Flaps/2
	}
	return c
}

// venueOf returns the venue part of an entity key: the text between its
// first and second "|" (as the script finds it).
func venueOf(key string) string {
	_, rest, ok := strings.Cut(key, "|")
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, "|")
	return v
}

// parseFlaps decodes a flap record "<opens>:<flaps>".
func parseFlaps(v string) (VenueFlaps, error) {
	o, f, ok := strings.Cut(v, ":")
	opens, err1 := strconv.Atoi(o)
	flaps, err2 := strconv.Atoi(f)
	if !ok || err1 != nil || err2 != nil || opens < 0 || flaps < 0 {
		return VenueFlaps{}, fmt.Errorf("malformed flap record %q", v)
	}
	return VenueFlaps{Opens: opens, Flaps: flaps}, nil
}

// validPerVenueMaxK reports a per-venue maximum k outside 0..MaxStabilization.
func validPerVenueMaxK(maxK int) error {
	if maxK < 0 || maxK > MaxStabilization {
		return fmt.Errorf("diff: per-venue max k %d: want 0 (off) to %d", maxK, MaxStabilization)
	}
	return nil
}
