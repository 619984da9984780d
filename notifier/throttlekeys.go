package notifier

import (
	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/dropstream/dropstream/notifier/subscriber"
)

// maxThrottleKeys bounds the remembered throttle keys.
const maxThrottleKeys = 4096

// throttleKeys remembers destinations' throttle keys by kind and address:
// deriving one parses the address and hashes it, about 4 % of a
// delivery's allocations (BENCHMARKS.md, "Notifier: webhooks over
// fasthttp"). Safe for concurrent use.
type throttleKeys struct {
	*lru.Cache[destAddress, string]
}

type destAddress struct{ kind, address string }

func newThrottleKeys() throttleKeys {
	c, _ := lru.New[destAddress, string](maxThrottleKeys) // fails only for a size below 1
	return throttleKeys{c}
}

// get returns a destination's throttle bucket, its core's hash (its id when
// it has no valid core); valid ones are remembered.
func (c throttleKeys) get(dest subscriber.Destination) string {
	a := destAddress{dest.Kind, dest.Address}
	if key, ok := c.Get(a); ok {
		return key
	}
	core, err := dest.Core()
	if err != nil {
		return dest.ID
	}
	key := subscriber.CoreHash(core)
	c.Add(a, key)
	return key
}
