// Package diff is the diff stage of the availability pipeline: it turns
// snapshots (avail.Snapshot on avail.Topics.Snapshots) into transitions
// with their run's record (on avail.Topics.Transitions), and the records
// of runs that flipped nothing (on avail.Topics.Runs).
//
// # Semantics
//
// Per scope, each snapshot is applied by one Lua script, atomically:
//
//   - Ordering. A scope remembers the last applied run as (run_at in
//     milliseconds, run_id). A snapshot whose (run_at, run_id) is not greater
//     (run_at first, then run_id compared byte-wise) changes nothing: a
//     replay or a late run. Its run record says Applied false. Failed runs
//     (OK false) are applied too — they advance the last run, so a replay of
//     a failed run is not applied twice and a late OK run older than a newer
//     failed one is ignored — but they never touch the open set or the
//     stabilization counters.
//   - Set diff. For an applied OK run, to_open = observed − open and
//     to_close = open − observed, against the scope's raw open set. Every
//     raw flip is emitted as a raw transition (Raw true).
//   - Stabilization, k = Snapshot.Stabilization (0 means 2, valid 1..10).
//     Each entity has a stable state (closed until first confirmed open). A
//     raw flip away from the stable state records a pending entry with
//     count 1; every later applied OK run in which the raw state still
//     differs from the stable state increments it, and at count k a stable
//     transition (Stable true) is emitted and the entry dropped. A raw flip
//     back to the stable state before that drops the entry: flapping
//     notifies nobody, though its raw flips are emitted. With k == 1 a flip
//     away from the stable state is emitted once, with Raw and Stable true.
//   - Per-venue stabilization (Input.PerVenueMaxK, WithPerVenueK; off by
//     default). The scope keeps each venue's raw opens and flaps (raw
//     closes of openings still pending or made by the previous OK run),
//     decayed, and each run uses per venue a k in 1..PerVenueMaxK chosen
//     from them instead of the snapshot's: 1 for a venue that (nearly)
//     never flaps, larger the more it flaps, the snapshot's until the
//     venue has a few opens (see FlapWindow). Result.VenueK counts the
//     venues by the k chosen.
//   - Baseline. The opens of a scope's first applied OK run carry Baseline
//     true, as do the stable confirmations of those same pending entries.
//     Notify = Stable && (!Baseline || Snapshot.NotifyFirstSight).
//   - LastSeen. A close carries the run_at of the scope's previous applied
//     OK run: the last run in which the entity was observed. Opens carry
//     the entity as the snapshot gave it; closes carry avail.ParseKey of
//     the entity key plus the venue name it had when it opened.
//   - Release bound. A stable open that notifies opened after the scope's
//     OK run before its raw open; Result.Notices counts them and
//     Result.ReleasedAfterMS is the earliest such run (the stage's
//     release → notice histogram).
//   - Sessions. A raw close also carries OpenRunID and OpenedAtMS, the run
//     that opened the entity (its raw open), so each raw flip tells its
//     session on its own: a raw open starts avail.SessionID(key, RunID), a
//     raw close ends avail.SessionID(key, OpenRunID). An entity whose open
//     the state does not know (opened under an earlier version) closes
//     without them.
//   - Event ids are avail.EventID(run_id, entity key, kind, stable), computed
//     in Lua with redis.sha1hex over the same string.
//
// The transitions of a run leave the run's fields (run id, run_at, scope
// key, source id, trace id) to the entry's run record; consumers get them
// back with avail.RunTransitions.Expand (availjson.DecodeTransitions does).
//
// Because the transitions and the run record are appended by the same
// script that changes the state, a crash between the script and the
// acknowledgement only replays the snapshot, which is then a no-op: nothing
// is lost and nothing is emitted twice.
//
// # The false-close guard
//
// A provider that answers a blank or blocked page with 200 reads as a scope
// where nothing is open. With a Guard (Input.Guard, WithGuard), a run that
// would close more than Guard.Min entities and more than Guard.Share of the
// scope's open ones is held: it changes nothing but the scope's last run,
// emits no transition, and its run record has status "held" (the stage
// counts it in dropstream.diff.runs{status="held"}). The next OK run
// confirms it — it would close as much, and then applies — or shows the
// closes false, and then nothing is heard of them.
//
// # Redis layout
//
// For scope key s in partition p = Snapshots.Partition(s), with tag
// "{avail.p}" (see Keys):
//
//	ds:{avail.p}:diff:opened:<s> HASH raw open entity key → the run that
//	                             opened it: "<run_at ms>\n<run_id>\n<venue name>"
//	ds:{avail.p}:diff:open:<s>   SET of raw open entity keys, from earlier
//	                             versions: adopted into opened (with "")
//	                             and deleted by the scope's next run
//	ds:{avail.p}:diff:scope:<s>  HASH at (last run_at ms), id (last run_id),
//	                             ok (run_at of the last applied OK run, as JSON text),
//	                             okms (the same in ms)
//	ds:{avail.p}:diff:flaps:<s>  HASH venue → "<raw opens>:<flaps>", under
//	                             per-venue stabilization only
//	ds:{avail.p}:diff:pend:<s>   HASH entity key → pending entry, only for
//	                             entities whose raw state differs from their
//	                             stable state: "<o|c><count>[b][@<ms>][:<last seen>]",
//	                             @<ms> on opens: the OK run before the raw open
//	ds:{avail.p}:transitions     stream of runs that flipped something
//	                             (avail.TypeTransitions: avail.RunTransitions,
//	                             the run record and up to 64 transitions and
//	                             about 32 KiB of them per entry)
//	ds:{avail.p}:runs            stream of the other run records (avail.TypeRun)
//
// All seven keys share the partition's hash tag, so the script touches one
// slot, also on Redis Cluster. The state keys expire StateTTL after
// the scope's last applied run, so scopes that are no longer polled (past
// dates) do not keep memory forever; a scope polled again after that starts
// over with a baseline run.
//
// Model is a pure-Go reference implementation of the same semantics, used by
// the tests to check the script.
package diff
