package feed

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The item scripts, in lua/. history.lua appends an item event to the
// history stream (deterministic event ids, so redeliveries collapse in
// ClickHouse); release.lua releases an item from one collection and clears
// an assigned item no collection waits for (content dropped, guid and hash
// kept).
var (
	//go:embed lua/history.lua
	luaHistory string
	//go:embed lua/release.lua
	luaRelease string
	//go:embed lua/observe.lua
	luaObserve string
	//go:embed lua/assign.lua
	luaAssign string
	//go:embed lua/cleanup.lua
	luaCleanup string
	//go:embed lua/drop.lua
	luaDrop string
	//go:embed lua/exclude.lua
	luaExclude string
)

// observeScript applies one successful poll (or push) to a feed's items.
// KEYS[1] meta. ARGV: prefix, now ms, include_existing (0|1), hist, tp,
// feed, keep (arrivals kept), then (iid, guid, hash, content, order,
// fingerprint) per item; order is first seen (ms) × 1000 plus the position
// in the document. A new item whose Fingerprint names another item is
// Held. A document with a new item records its time in the feed's
// arrivals, which the adaptive interval reads. Returns {-1,0,0,0} for a
// poll older than the newest applied, else {0, new, edited, held}.
var observeScript = redis.NewScript(luaHistory + luaObserve)

// assignScript assigns every assignable item of a feed to the collections
// of its subscribables (skipping dropped ones), then completes the due
// collections and appends them to the collections stream, in one atomic
// step. An item due for a completed collection opens the next one of its
// window ("<within>+2", ...; meta's cur:<name> names it); a daily or weekly
// collection completes early at collcap items. A poll that saw the feed
// (seen 1) records its time in meta's seen.
// KEYS[1] meta. ARGV: prefix, now, min ms, await ms, max ms, colls, hist,
// tp, feed, limit, collcap, seen (0|1), then (name, kind, within, due, n)
// per subscribable. Returns {assigned, completed}.
var assignScript = redis.NewScript(luaHistory + luaAssign)

// cleanupScript runs once a completed collection was delivered: it records
// each item's delivery, releases the items and deletes the collection. A
// second run finds nothing to do.
// KEYS[1] meta. ARGV: prefix, now, hist, tp, feed, name, within.
var cleanupScript = redis.NewScript(luaHistory + luaRelease + luaCleanup)

// dropScript runs when a subscribable is deleted: it marks the name dropped
// (assignScript skips it), releases the items of its open collections
// undelivered, deletes those collections and restarts its every-n
// numbering; a completed collection is left to cleanupScript. Running it
// again finds nothing.
// KEYS[1] meta. ARGV: prefix, now, hist, tp, feed, name. Returns the items
// released.
var dropScript = redis.NewScript(luaHistory + luaRelease + luaDrop)

// excludeScript marks an Unassigned item Excluded. KEYS[1] meta. ARGV:
// prefix, now, hist, tp, feed, iid. Returns the state before.
var excludeScript = redis.NewScript(luaHistory + luaExclude)
