// Package diff is the availability pipeline's diff stage: it turns
// snapshots (avail.Topics.Snapshots) into transitions with their run's
// record (avail.Topics.Transitions), and records runs that flipped nothing
// (avail.Topics.Runs). One Lua script applies each snapshot atomically and
// appends the output, so a replay after a crash is a no-op:
//
//   - A snapshot not newer than the scope's last run (run_at ms, then
//     run_id) changes nothing; failed runs only advance the last run.
//   - An OK run opens observed − open and closes open − observed (raw).
//   - A raw flip becomes stable after k OK runs still differing
//     (Snapshot.Stabilization, default 2, or per venue with
//     Input.PerVenueMaxK); a flip back drops the count.
//   - A scope's first OK run's opens carry Baseline; Notify = Stable &&
//     (!Baseline || Snapshot.NotifyFirstSight).
//   - A close carries LastSeen and the session (OpenRunID) it ends; event
//     ids are avail.EventID, computed in Lua.
//   - With a Guard, a run closing more than Guard.Min entities and
//     Guard.Share of the open ones waits for the next OK run to agree.
//
// Redis layout, for scope key s with its partition's tag {avail.p}:
//
//	ds:{avail.p}:diff:opened:<s>  HASH raw open entity → "<run_at ms>\n<run_id>\n<venue name>"
//	ds:{avail.p}:diff:open:<s>    SET of an earlier version, adopted into opened
//	ds:{avail.p}:diff:scope:<s>   HASH at, id (last run), ok, okms (last OK run)
//	ds:{avail.p}:diff:flaps:<s>   HASH venue → "<raw opens>:<flaps>"
//	ds:{avail.p}:diff:pend:<s>    HASH entity → "<o|c><count>[b][@<ms>][:<last seen>]"
//	ds:{avail.p}:transitions      stream of avail.RunTransitions (up to 64 each)
//	ds:{avail.p}:runs             stream of the other run records
//
// State keys expire StateTTL after the scope's last run; a scope polled
// after that starts over with a baseline.
package diff
