package diff

import "fmt"

// Per-venue stabilization (Input.PerVenueMaxK): each venue's k comes from
// its flap rate. A flap is a raw close of an opening still pending or made
// by the previous OK run. Opens and flaps are halved whenever the opens
// exceed FlapWindow, so old behaviour fades. k is the snapshot's below
// MinFlapOpens opens, 1 when at most 5% flapped, else
// min(maxK, 2 + ⌊flaps·(maxK−1)/opens⌋).
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
