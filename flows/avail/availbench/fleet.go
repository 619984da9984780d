package availbench

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/stream"
)

// Identity of the bench's entities.
const (
	benchSource   = "bench-src"
	benchProvider = "resy"
	benchDate     = "2099-07-04"
	benchParty    = 2
)

// fleet generates snapshots: scope s observes PerScope entities of a ring
// of 2×PerScope, sliding by churn entities from run 2 on.
type fleet struct {
	perScope, churn int
	runs            []int // next run of each scope
}

func newFleet(scopes, perScope, churn int) *fleet {
	return &fleet{perScope: perScope, churn: churn, runs: make([]int, scopes)}
}

func venue(s int) string { return fmt.Sprintf("v%07d", s) }

// scopeKey is the key of scope s.
func scopeKey(s int) string {
	return avail.Scope{Venue: venue(s), Date: benchDate, PartySize: benchParty}.Key(benchSource)
}

// entity returns entry i of scope s's ring.
func entity(s, i int) avail.Entity {
	v := venue(s)
	hhmm := fmt.Sprintf("%02d:%02d", i/12%24, i%12*5)
	party := benchParty + i/288
	return avail.Entity{Key: avail.SlotKey(benchProvider, v, benchDate, hhmm, party), Kind: avail.EntitySlot,
		Provider: benchProvider, Venue: v, VenueName: "Restaurant " + v, Date: benchDate, Time: hhmm,
		PartySize: party, Attrs: map[string]string{"type": "Dining Room"}}
}

// offset is the first ring entry of run r's window.
func (f *fleet) offset(r int) int { return max(0, r-1) * f.churn }

// next returns scope s's next snapshot, run at runAt.
func (f *fleet) next(s int, runAt time.Time) avail.Snapshot {
	r := f.runs[s]
	f.runs[s]++
	ring := 2 * f.perScope
	ents := make([]avail.Entity, f.perScope)
	for i := range ents {
		ents[i] = entity(s, (f.offset(r)+i)%ring)
	}
	return avail.Snapshot{RunID: fmt.Sprintf("%s-r%06d", venue(s), r), SourceID: benchSource, Provider: benchProvider,
		ScopeKey: scopeKey(s), RunAt: runAt, StartedAt: runAt.Add(-time.Second), OK: true, Entities: ents,
		Stabilization: 2}
}

// opensNext is how many stable opens scope s's next run confirms.
func (f *fleet) opensNext(s int) int {
	if f.runs[s] >= 3 && f.churn < f.perScope {
		return f.churn
	}
	return 0
}

// message encodes a snapshot as a message of the snapshots topic.
func message(snap avail.Snapshot) (*stream.Message, error) {
	body, err := json.Marshal(snap)
	if err != nil {
		return nil, fmt.Errorf("availbench: encode snapshot: %w", err)
	}
	return stream.NewMessage(snap.ScopeKey, avail.TypeSnapshot, body), nil
}
