package diff

import "fmt"

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

// validPerVenueMaxK reports a per-venue maximum k outside 0..MaxStabilization.
func validPerVenueMaxK(maxK int) error {
	if maxK < 0 || maxK > MaxStabilization {
		return fmt.Errorf("diff: per-venue max k %d: want 0 (off) to %d", maxK, MaxStabilization)
	}
	return nil
}
