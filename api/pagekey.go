package api

import (
	"fmt"
	"math"
	"time"
)

// NewestFirst returns a paging key (see [PageOf]) that orders items by
// time t, newest first, then by the rest of the key, so that a list shown
// newest first pages with stable cursors while new items arrive at its
// head.
func NewestFirst(t time.Time, rest string) string {
	return fmt.Sprintf("%020d/%s", uint64(math.MaxInt64-t.UnixNano()), rest)
}
