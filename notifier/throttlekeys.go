package notifier

import (
	"sync"

	"github.com/dropstream/dropstream/notifier/subscriber"
)

// maxThrottleKeys bounds the remembered throttle keys; past it they are
// all forgotten at once.
const maxThrottleKeys = 4096

// throttleKeys remembers destinations' throttle keys by kind and address:
// deriving one parses the address and hashes it, about 4 % of a
// delivery's allocations (BENCHMARKS.md, "Notifier: webhooks over
// fasthttp"). Safe for concurrent use.
type throttleKeys struct {
	mu   sync.Mutex
	keys map[destAddress]string
}

type destAddress struct{ kind, address string }

// get returns a destination's throttle bucket, its core's hash (its id when
// it has no valid core); valid ones are remembered.
func (c *throttleKeys) get(dest subscriber.Destination) string {
	a := destAddress{dest.Kind, dest.Address}
	c.mu.Lock()
	key, ok := c.keys[a]
	c.mu.Unlock()
	if ok {
		return key
	}
	core, err := dest.Core()
	if err != nil {
		return dest.ID
	}
	key = subscriber.CoreHash(core)
	c.mu.Lock()
	if c.keys == nil || len(c.keys) >= maxThrottleKeys {
		c.keys = make(map[destAddress]string)
	}
	c.keys[a] = key
	c.mu.Unlock()
	return key
}
