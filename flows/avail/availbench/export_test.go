package availbench

import "context"

// DiffSnapshots publishes the next snapshot of n scopes (round robin over
// the baselined fleet) and measures the diff applying them.
func (b *Harness) DiffSnapshots(ctx context.Context, n int) (Rate, error) {
	b.runs += int64(n)
	return b.diffRound(ctx, "snapshots", n)
}
