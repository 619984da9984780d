package watch

import (
	"log/slog"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/internal/testenv"
)

// waitTimeout bounds every wait of the tests.
const waitTimeout = 20 * time.Second

// mini returns a client of a fresh miniredis, for pure logic.
func mini(t *testing.T) redis.UniversalClient {
	t.Helper()
	return testenv.Dial(t, "redis://"+miniredis.RunT(t).Addr())
}

// quiet discards the logs of code under test.
var quiet = slog.New(slog.DiscardHandler)

// slot returns the resy slot of venue on date at hhmm for party.
func slot(venue, date, hhmm string, party int) avail.Entity {
	return avail.Entity{Key: avail.SlotKey("resy", venue, date, hhmm, party), Kind: avail.EntitySlot,
		Provider: "resy", Venue: venue, VenueName: "Chez " + venue, Date: date, Time: hhmm, PartySize: party}
}
