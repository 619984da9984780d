package diff

import (
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/dropstream/dropstream/avail"
)

// Model is a pure-Go reference implementation of the diff semantics (see
// the package documentation), holding every scope's state in memory. It
// exists so tests can check the Lua script against an independent, readable
// implementation. The zero value is not usable; call NewModel. A Model is
// not safe for concurrent use.
type Model struct {
	scopes map[string]*modelScope
	// Guard is the false-close guard the model applies; none by default.
	Guard Guard
	// PerVenueMaxK turns per-venue stabilization on with k at most this
	// (see FlapWindow); 0, the default, leaves it off.
	PerVenueMaxK int
}

// modelScope is the state the script keeps in the scope's three keys.
type modelScope struct {
	hasRun bool
	lastAt int64 // run_at in ms of the last applied run
	lastID string
	hasOK  bool
	lastOK time.Time // run_at of the last applied OK run
	// lastOKms is lastOK in Unix ms as the script keeps it; 0 before the
	// first OK run.
	lastOKms int64
	open     map[string]opening
	pending  map[string]Pending
	held     string // the run the guard held last, when it was the last run
	flaps    map[string]VenueFlaps
}

// opening is the run that raw-opened an entity, and its venue name then.
type opening struct {
	atMS      int64
	runID     string
	venueName string
}

// NewModel returns a model with no scopes.
func NewModel() *Model { return &Model{scopes: map[string]*modelScope{}} }

// Apply applies snap, which must pass Validate, as the script would, with
// traceID (the processing span's trace id, possibly empty) copied into the
// outputs. It returns the result, the transitions in emission order (raw
// closes, raw opens, then stable confirmations by entity key), and the run
// record.
func (m *Model) Apply(snap avail.Snapshot, traceID string) (Result, []Transition, avail.RunRecord) {
	s := m.scope(snap.ScopeKey)
	obs := observed(snap)
	rec := avail.RunRecord{RunID: snap.RunID, SourceID: snap.SourceID, Provider: snap.Provider,
		ScopeKey: snap.ScopeKey, StartedAt: snap.StartedAt, RunAt: snap.RunAt, Status: avail.StatusOK,
		Error: runError(snap), Observed: len(obs), TraceID: traceID}
	if !snap.OK {
		rec.Status = avail.StatusFailed
	}
	at := snap.RunAt.UnixMilli()
	if s.hasRun && !runIsNewer(at, snap.RunID, s.lastAt, s.lastID) {
		return Result{}, nil, rec
	}
	s.hasRun, s.lastAt, s.lastID = true, at, snap.RunID
	rec.Applied = true
	if !snap.OK {
		return Result{Applied: true}, nil, rec
	}

	byKey := make(map[string]avail.Entity, len(obs))
	for _, e := range obs {
		byKey[e.Key] = e
	}
	var toClose []string
	for key := range s.open {
		if _, seen := byKey[key]; !seen {
			toClose = append(toClose, key)
		}
	}
	slices.Sort(toClose)
	g := m.Guard
	if g.Min > 0 && len(toClose) > g.Min && len(toClose)*1000 > g.permille()*len(s.open) && s.held == "" {
		s.held = snap.RunID
		rec.Status, rec.Applied, rec.Closed = "held", false, len(toClose)
		return Result{Held: true}, nil, rec
	}
	s.held = ""

	snapK := stabilization(snap)
	venueKs := map[string]int{} // the k of each venue the run looks at
	kOf := func(key string) int {
		if m.PerVenueMaxK == 0 {
			return snapK
		}
		v := venueOf(key)
		if k, ok := venueKs[v]; ok {
			return k
		}
		c, ok := s.flaps[v]
		venueKs[v] = venueK(c, ok, snapK, m.PerVenueMaxK)
		return venueKs[v]
	}
	bump := func(key string, opens, flaps int) {
		if m.PerVenueMaxK == 0 {
			return
		}
		c := s.flaps[venueOf(key)]
		c.Opens += opens
		c.Flaps += flaps
		s.flaps[venueOf(key)] = c
	}
	baseline, prevOK, prevMS := !s.hasOK, s.lastOK, s.lastOKms
	s.hasOK, s.lastOK, s.lastOKms = true, snap.RunAt, at
	var toOpen []avail.Entity
	for _, e := range obs {
		if _, open := s.open[e.Key]; !open {
			toOpen = append(toOpen, e)
		}
	}

	// Entities pending before this run: flipped back, or one run closer.
	back := map[string]bool{}
	flapped := map[string]bool{} // pending opens that closed before stabilizing
	type confirmation struct {
		key string
		p   Pending
	}
	var confirmed []confirmation
	for _, key := range slices.Sorted(maps.Keys(s.pending)) {
		p := s.pending[key]
		k := kOf(key)
		_, rawOpen := byKey[key]
		if (p.Kind == avail.KindOpen) != rawOpen {
			back[key] = true
			flapped[key] = p.Kind == avail.KindOpen
			delete(s.pending, key)
			continue
		}
		p.Count++
		if p.Count >= k {
			confirmed = append(confirmed, confirmation{key, p})
			delete(s.pending, key)
			continue
		}
		s.pending[key] = p
	}

	var res Result
	var out []Transition
	notice := func(base bool, after int64) {
		if after != 0 && (snap.NotifyFirstSight || !base) {
			res.Notices++
			if res.ReleasedAfterMS == 0 || after < res.ReleasedAfterMS {
				res.ReleasedAfterMS = after
			}
		}
	}
	emit := func(e avail.Entity, kind string, stable, raw, base bool, lastSeen time.Time) {
		out = append(out, newTransition(snap, traceID, e, kind, stable, raw, base, lastSeen))
	}
	for _, key := range toClose {
		o := s.open[key]
		delete(s.open, key)
		res.Closed++
		k := kOf(key)
		if flapped[key] || prevMS != 0 && o.runID != "" && o.atMS == prevMS {
			bump(key, 0, 1)
		}
		e, _ := avail.ParseKey(key)
		e.VenueName = o.venueName
		t := newTransition(snap, traceID, e, avail.KindClose, k == 1 && !back[key], true, false, prevOK)
		if o.runID != "" || o.atMS != 0 {
			t.OpenRunID, t.OpenedAtMS = o.runID, o.atMS
		}
		out = append(out, t)
		switch {
		case back[key]:
		case k == 1:
			res.StableClosed++
		default:
			s.pending[key] = Pending{Kind: avail.KindClose, Count: 1, LastSeen: prevOK}
		}
	}
	for _, e := range toOpen {
		s.open[e.Key] = opening{atMS: at, runID: snap.RunID, venueName: canonicalEntity(e).VenueName}
		res.Opened++
		k := kOf(e.Key)
		bump(e.Key, 1, 0)
		switch {
		case back[e.Key]:
			emit(e, avail.KindOpen, false, true, baseline, time.Time{})
		case k == 1:
			res.StableOpened++
			notice(baseline, prevMS)
			emit(e, avail.KindOpen, true, true, baseline, time.Time{})
		default:
			s.pending[e.Key] = Pending{Kind: avail.KindOpen, Count: 1, Baseline: baseline, ReleasedAfterMS: prevMS}
			emit(e, avail.KindOpen, false, true, baseline, time.Time{})
		}
	}
	for _, c := range confirmed {
		e, _ := avail.ParseKey(c.key)
		if c.p.Kind == avail.KindOpen {
			e = byKey[c.key]
			res.StableOpened++
			notice(c.p.Baseline, c.p.ReleasedAfterMS)
		} else {
			res.StableClosed++
		}
		emit(e, c.p.Kind, true, false, c.p.Baseline, c.p.LastSeen)
	}
	for v, c := range s.flaps {
		s.flaps[v] = c.decay()
	}
	for _, k := range venueKs {
		res.VenueK[k-1]++
	}
	res.Applied = true
	rec.Opened, rec.Closed = res.Opened, res.Closed
	return res, out, rec
}

// State returns a copy of a scope's state; a scope never seen has a zero
// State.
func (m *Model) State(scopeKey string) State {
	s, ok := m.scopes[scopeKey]
	if !ok {
		return State{}
	}
	st := State{Open: slices.Sorted(maps.Keys(s.open)), LastRunID: s.lastID, HeldRunID: s.held}
	if len(s.pending) > 0 {
		st.Pending = maps.Clone(s.pending)
	}
	if len(s.flaps) > 0 {
		st.Flaps = maps.Clone(s.flaps)
	}
	if s.hasRun {
		st.LastRunAt = time.UnixMilli(s.lastAt)
	}
	if s.hasOK {
		st.LastOKRunAt = s.lastOK
	}
	return st
}

func (m *Model) scope(key string) *modelScope {
	s, ok := m.scopes[key]
	if !ok {
		s = &modelScope{open: map[string]opening{}, pending: map[string]Pending{}, flaps: map[string]VenueFlaps{}}
		m.scopes[key] = s
	}
	return s
}

// newTransition builds a transition as the script encodes it. Open entities
// go through JSON, as the script embeds their encoding, so the model's
// value equals the decoded payload.
func newTransition(snap avail.Snapshot, traceID string, e avail.Entity, kind string,
	stable, raw, baseline bool, lastSeen time.Time) Transition {
	if kind == avail.KindOpen {
		e = canonicalEntity(e)
	}
	return Transition{
		Raw:      raw,
		EventID:  avail.EventID(snap.RunID, e.Key, kind, stable),
		Entity:   e,
		ScopeKey: snap.ScopeKey,
		SourceID: snap.SourceID,
		Kind:     kind,
		Stable:   stable,
		Baseline: baseline,
		Notify:   stable && (!baseline || snap.NotifyFirstSight),
		RunID:    snap.RunID,
		RunAt:    snap.RunAt,
		LastSeen: lastSeen,
		TraceID:  traceID,
	}
}

// canonicalEntity returns e as it decodes from its JSON encoding (empty
// attrs become nil, invalid UTF-8 is replaced).
func canonicalEntity(e avail.Entity) avail.Entity {
	b, err := json.Marshal(e)
	if err != nil {
		return e
	}
	var out avail.Entity
	if err := json.Unmarshal(b, &out); err != nil {
		return e
	}
	return out
}
