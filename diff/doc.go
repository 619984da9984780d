// Package diff is the diff stage of the availability pipeline: it turns
// snapshots (avail.Snapshot on avail.Topics.Snapshots) into transitions
// with their run's record (on avail.Topics.Transitions), and the records
// of runs that flipped nothing (on avail.Topics.Runs).
//
// # Semantics
//
// Per scope, one Lua script applies each snapshot atomically:
//
//   - Ordering. A snapshot not newer than the scope's last applied run
//     (run_at in ms, then run_id byte-wise) changes nothing; its run record
//     says Applied false. Failed runs advance the last run but touch no
//     other state.
//   - Set diff. An OK run opens observed − open and closes open − observed;
//     each raw flip is a transition with Raw true.
//   - Stabilization. k is Snapshot.Stabilization (0 means 2, valid 1..10).
//     A raw flip away from the entity's stable state starts a pending count;
//     after k OK runs still differing, a transition with Stable true is
//     emitted. A flip back first drops the count, so flapping notifies
//     nobody. With k == 1 one transition has Raw and Stable true.
//   - Per-venue stabilization (Input.PerVenueMaxK, off by default). Each
//     venue gets a k in 1..PerVenueMaxK from its decayed flap rate (see
//     FlapWindow); Result.VenueK counts the venues by k.
//   - Baseline. The opens of a scope's first applied OK run, and their
//     stable confirmations, carry Baseline true. Notify = Stable &&
//     (!Baseline || Snapshot.NotifyFirstSight).
//   - LastSeen. A close carries the run_at of the scope's previous OK run,
//     and the entity as avail.ParseKey rebuilds it plus its venue name.
//   - Release bound. Result.Notices counts the notifying stable opens and
//     Result.ReleasedAfterMS is the earliest OK run before their raw opens.
//   - Sessions. A raw close carries OpenRunID and OpenedAtMS of the raw
//     open, so a close ends avail.SessionID(key, OpenRunID).
//   - Event ids are avail.EventID(run_id, entity key, kind, stable),
//     computed in Lua with redis.sha1hex.
//
// A run's transitions leave the run's fields to its run record;
// avail.RunTransitions.Expand puts them back. The script that changes the
// state also appends the output, so a crash before the acknowledgement
// only replays the snapshot, a no-op.
//
// # The false-close guard
//
// A provider may answer a blocked page as if nothing were open. With a
// Guard, a run closing more than Guard.Min entities and more than
// Guard.Share of the open ones is held: it changes only the scope's last
// run and its run record has status "held". The next OK run applies if it
// closes as much; otherwise the held closes never happen.
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
// All the keys share the partition's hash tag, so the script touches one
// slot. The state keys expire StateTTL after the scope's last applied run;
// a scope polled again after that starts over with a baseline run.
package diff
