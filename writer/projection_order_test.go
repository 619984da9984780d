package writer_test

import (
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/writer"
)

var orderSeed = flag.Uint64("order-seed", 0, "seed of TestProjection_sameStateAndSessionsInAnyOrder (0: from the clock)")

// orderBackend is a pair of empty Redis databases of one kind: one for the
// transitions applied in time order, one for the same shuffled.
type orderBackend struct {
	name     string
	ref, got redis.UniversalClient
}

func orderBackends(t *testing.T) []orderBackend {
	t.Helper()
	b := testenv.Backends()
	return []orderBackend{{"miniredis", b[0].Client(t), b[0].Client(t)}, {"redis", b[1].Client(t), b[1].Client(t)}}
}

// TestProjection_sameStateAndSessionsInAnyOrder applies random histories of
// one entity — raw opens and closes in any pattern (reopens, opens after
// opens, closes after closes, several runs in one millisecond), some stable
// transitions, venue names that change — once in time order and once
// shuffled with duplicates, and wants the same Redis content (hash,
// history, indexes), the same Get and Sessions, and sessions that pair the
// flips as writer/pairing.go pairs them for ClickHouse.
func TestProjection_sameStateAndSessionsInAnyOrder(t *testing.T) {
	seed := *orderSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (go test ./writer/ -run %s -order-seed=%[1]d)", seed, t.Name())
	trials := 100
	if testing.Short() {
		trials = 20
	}
	e := slot("order")
	part := avail.NewTopics(partitions).Transitions.Partition(scopeKey(e.Venue))
	for _, be := range orderBackends(t) {
		t.Run(be.name, func(t *testing.T) {
			ctx := t.Context()
			rng := rand.New(rand.NewPCG(seed, 1))
			for trial := range trials {
				maxSessions := []int{1, 2, 3, 100}[rng.IntN(4)]
				history := randomHistory(rng, e)
				inOrder := slices.Clone(history)
				slices.SortStableFunc(inOrder, func(a, b avail.Transition) int {
					return cmp.Or(a.RunAt.Compare(b.RunAt), strings.Compare(a.RunID, b.RunID), strings.Compare(a.Kind, b.Kind))
				})
				var shuffled []avail.Transition
				for _, tr := range history {
					for range 1 + rng.IntN(2)*rng.IntN(3) {
						shuffled = append(shuffled, tr)
					}
				}
				rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
				describe := func() string {
					return fmt.Sprintf("trial %d, max sessions %d\nin order: %s\napplied:  %s", trial, maxSessions,
						describeHistory(inOrder), describeHistory(shuffled))
				}

				var results [2]string
				for i, run := range []struct {
					rdb redis.UniversalClient
					trs []avail.Transition
				}{{be.ref, inOrder}, {be.got, shuffled}} {
					if err := run.rdb.FlushDB(ctx).Err(); err != nil {
						t.Fatalf("FLUSHDB: %v", err)
					}
					p := newProjection(t, run.rdb, maxSessions)
					for _, tr := range run.trs {
						if _, err := p.Apply(ctx, part, tr); err != nil {
							t.Fatalf("%s\nApply: %v", describe(), err)
						}
					}
					st, err := p.Get(ctx, e.Key)
					if err != nil {
						t.Fatalf("%s\nGet: %v", describe(), err)
					}
					sessions, err := p.Sessions(ctx, e.Key, 0)
					if err != nil {
						t.Fatalf("%s\nSessions: %v", describe(), err)
					}
					results[i] = fmt.Sprintf("%+v\n%+v\n%s", st, sessions, dump(t, run.rdb))
					if i == 0 {
						checkModel(t, describe, e.Key, maxSessions, inOrder, st, sessions)
						hist := "ds:" + avail.NewTopics(partitions).Transitions.HashTag(part) + ":sessions:" + e.Key
						if n := run.rdb.ZCard(ctx, hist).Val(); n > int64(2*maxSessions) {
							t.Fatalf("%s\nthe history holds %d flips, want at most %d", describe(), n, 2*maxSessions)
						}
					}
				}
				if results[0] != results[1] {
					t.Fatalf("%s\nin order:\n%s\nshuffled:\n%s", describe(), results[0], results[1])
				}
			}
		})
	}
}

// randomHistory returns up to 12 transitions of e in runs a random 0 to 2
// minutes apart, under random run ids (so runs of one millisecond sort by
// id, not by creation): mostly raw flips of either kind, some stable ones
// alone or together with the raw flip of their run. Opens carry the entity
// under one of two venue names, closes only what the key tells and a
// random LastSeen.
func randomHistory(rng *rand.Rand, e avail.Entity) []avail.Transition {
	bare, _ := avail.ParseKey(e.Key)
	at := t0
	used := map[string]bool{}
	var out []avail.Transition
	for i := range 1 + rng.IntN(12) {
		at = at.Add(time.Duration(rng.IntN(3)) * time.Minute)
		run := fmt.Sprintf("run-%03x", rng.IntN(4096))
		for used[run] {
			run = fmt.Sprintf("run-%03x", rng.IntN(4096))
		}
		used[run] = true
		kind := []string{avail.KindOpen, avail.KindClose}[rng.IntN(2)]
		tr := avail.Transition{Entity: e, ScopeKey: scopeKey(e.Venue), SourceID: "src", Kind: kind, Raw: true,
			RunID: run, RunAt: at, TraceID: fmt.Sprintf("%032x", i+1)}
		if rng.IntN(2) == 0 {
			tr.Entity.VenueName += " (renamed)"
		}
		if kind == avail.KindClose {
			tr.Entity = bare
			if rng.IntN(3) > 0 {
				tr.LastSeen = at.Add(-time.Duration(1+rng.IntN(120)) * time.Second)
			}
		}
		switch rng.IntN(8) {
		case 0: // stable only
			tr.Raw, tr.Stable = false, true
		case 1: // raw and stable (stabilization 1)
			tr.Stable = true
		}
		tr.EventID = avail.EventID(run, e.Key, kind, tr.Stable && !tr.Raw)
		out = append(out, tr)
		if rng.IntN(10) == 0 { // the other kind in the same run
			other := tr
			other.Kind, other.Entity, other.Raw, other.Stable = avail.KindClose, bare, true, false
			if kind == avail.KindClose {
				other.Kind, other.Entity = avail.KindOpen, e
			}
			other.EventID = avail.EventID(run, e.Key, other.Kind, false)
			out = append(out, other)
		}
	}
	return out
}

func describeHistory(trs []avail.Transition) string {
	var b strings.Builder
	for _, tr := range trs {
		phase := "raw"
		switch {
		case tr.Raw && tr.Stable:
			phase = "raw+stable"
		case tr.Stable:
			phase = "stable"
		}
		fmt.Fprintf(&b, "%s %s %s@%s; ", tr.Kind, phase, tr.RunID, tr.RunAt.Sub(t0))
	}
	return b.String()
}

// checkModel checks the projection of inOrder against the rules: the state
// is the kind of the newest raw flip, the current session that of the
// newest raw open, and the sessions pair the last 2×maxSessions raw flips
// as writer/pairing.go does: an open is closed by the flip right after it
// when that is a close, and stays open otherwise.
func checkModel(t *testing.T, describe func() string, key string, maxSessions int, inOrder []avail.Transition,
	st writer.EntityState, sessions []writer.Session) {
	t.Helper()
	var raw []avail.Transition
	for _, tr := range inOrder {
		if tr.Raw || !tr.Stable {
			raw = append(raw, tr)
		}
	}
	wantState, wantSession := "", ""
	for _, tr := range raw {
		wantState = map[string]string{avail.KindOpen: writer.StateOpen, avail.KindClose: writer.StateClosed}[tr.Kind]
		if tr.Kind == avail.KindOpen {
			wantSession = avail.SessionID(key, tr.RunID)
		}
	}
	kept := raw[max(0, len(raw)-2*maxSessions):]
	var want []string
	for i := len(kept) - 1; i >= 0; i-- {
		if kept[i].Kind != avail.KindOpen {
			continue
		}
		if i+1 < len(kept) && kept[i+1].Kind == avail.KindClose {
			want = append(want, fmt.Sprintf("closed %s-%s %v", kept[i].RunID, kept[i+1].RunID, kept[i+1].RunAt.Sub(kept[i].RunAt)))
		} else {
			want = append(want, "open "+kept[i].RunID)
		}
	}
	want = want[:min(len(want), maxSessions)]
	var got []string
	for _, s := range sessions {
		if s.State == writer.StateOpen {
			got = append(got, "open "+s.OpenRun)
		} else {
			got = append(got, fmt.Sprintf("closed %s-%s %v", s.OpenRun, s.CloseRun, s.Duration))
		}
		if s.ID != avail.SessionID(key, s.OpenRun) || s.TraceID == "" {
			t.Fatalf("%s\nsession %+v: id not that of its open run, or no trace", describe(), s)
		}
	}
	if st.State != wantState || st.SessionID != wantSession || !slices.Equal(got, want) {
		t.Fatalf("%s\nstate %q, session %s, sessions %q;\nwant %q, %s, %q", describe(), st.State, st.SessionID, got,
			wantState, wantSession, want)
	}
}

// dump renders every key of a database with its content and whether it
// expires.
func dump(t *testing.T, rdb redis.UniversalClient) string {
	t.Helper()
	ctx := t.Context()
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatalf("KEYS: %v", err)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		var v any
		switch typ := rdb.Type(ctx, k).Val(); typ {
		case "hash":
			v = rdb.HGetAll(ctx, k).Val()
		case "zset":
			v = rdb.ZRangeWithScores(ctx, k, 0, -1).Val()
		default:
			v = typ
		}
		fmt.Fprintf(&b, "%s (expires %v): %v\n", k, rdb.PTTL(ctx, k).Val() > 0, v)
	}
	return b.String()
}

// TestProjection_convertsSessionListsOfEarlierVersions starts from what the
// projection stored before it kept histories — an entity opened in run 1
// and opened again in run 4 (a close missed), its session list holding the
// session of run 1 — and applies the close of run 2, redelivered late:
// the list becomes a history and the sessions are as if the flips had come
// in order.
func TestProjection_convertsSessionListsOfEarlierVersions(t *testing.T) {
	for _, be := range backends(t) {
		t.Run(be.name, func(t *testing.T) {
			ctx := t.Context()
			p := newProjection(t, be.rdb, 0)
			e := slot("legacy")
			part := avail.NewTopics(partitions).Transitions.Partition(scopeKey(e.Venue))
			tag := avail.NewTopics(partitions).Transitions.HashTag(part)
			ms := func(run int) string { return fmt.Sprint(runAt(run).UnixMilli()) }
			rec, _ := json.Marshal(map[string]string{"session_id": avail.SessionID(e.Key, runID(1)), "state": "open",
				"open_run": runID(1), "opened_at": ms(1), "trace_id": fmt.Sprintf("%032x", 2)})
			err := be.rdb.HSet(ctx, "ds:"+tag+":entity:"+e.Key, "state", "open", "last_run", runID(4),
				"last_run_at", ms(4), "last_event", "e4", "trace_id", fmt.Sprintf("%032x", 5), "opened_at", ms(1),
				"session_id", avail.SessionID(e.Key, runID(1)), "open_run", runID(1), "first_seen_at", ms(1),
				"last_seen_at", ms(4), "kind", e.Kind, "provider", e.Provider, "venue", e.Venue,
				"venue_name", e.VenueName, "date", e.Date, "time", e.Time, "party_size", "2",
				"scope_key", scopeKey(e.Venue), "source_id", "src").Err()
			if err == nil {
				err = be.rdb.RPush(ctx, "ds:"+tag+":sessions:"+e.Key, rec).Err()
			}
			if err == nil {
				err = be.rdb.ZAdd(ctx, "ds:"+tag+":entities:open", redis.Z{Member: e.Key}).Err()
			}
			if err != nil {
				t.Fatalf("writing the old layout: %v", err)
			}
			got, err := p.Sessions(ctx, e.Key, 0)
			if err != nil {
				t.Fatalf("Sessions of the old layout: %v", err)
			}
			checkSessions(t, e.Key, got, []wantSession{{"open", 1, 0}})

			close2 := transition(e, "close", 2, false)
			close2.Entity, _ = avail.ParseKey(e.Key)
			if res, err := p.Apply(ctx, part, close2); err != nil || res != writer.ResultStale {
				t.Fatalf("Apply close 2 = %q, %v; want stale", res, err)
			}
			st, err := p.Get(ctx, e.Key)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			checkEntity(t, st, e, part, "open", "", 4, 2, 1, 4, 4)
			got, err = p.Sessions(ctx, e.Key, 0)
			if err != nil {
				t.Fatalf("Sessions: %v", err)
			}
			checkSessions(t, e.Key, got, []wantSession{{"open", 4, 0}, {"closed", 1, 2}})
		})
	}
}
