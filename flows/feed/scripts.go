package feed

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The item scripts, in lua/: history.lua appends an item event; release.lua
// releases an item from a collection and clears it when none waits for it.
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

// observeScript applies a successful poll or push to a feed's items and
// returns {-1,0,0,0} for a stale poll, else {0, new, edited, held}.
// KEYS[1] meta. ARGV: prefix, now ms, include_existing, hist, tp, feed,
// keep, then (iid, guid, hash, content, order, fingerprint) per item.
var observeScript = redis.NewScript(luaHistory + luaObserve)

// assignScript assigns assignable items to the subscribables' collections,
// then completes and publishes the due ones, atomically.
// KEYS[1] meta. ARGV: prefix, now, min ms, await ms, max ms, colls, hist,
// tp, feed, limit, collcap, seen, then (name, kind, within, due, n) per
// subscribable. Returns {assigned, completed}.
var assignScript = redis.NewScript(luaHistory + luaAssign)

// cleanupScript records a delivered collection's items, releases them and
// deletes the collection; idempotent.
// KEYS[1] meta. ARGV: prefix, now, hist, tp, feed, name, within.
var cleanupScript = redis.NewScript(luaHistory + luaRelease + luaCleanup)

// dropScript drops a deleted subscribable: it releases its open
// collections' items undelivered and deletes them; idempotent.
// KEYS[1] meta. ARGV: prefix, now, hist, tp, feed, name. Returns the
// items released.
var dropScript = redis.NewScript(luaHistory + luaRelease + luaDrop)

// excludeScript marks an Unassigned item Excluded. KEYS[1] meta. ARGV:
// prefix, now, hist, tp, feed, iid. Returns the state before.
var excludeScript = redis.NewScript(luaHistory + luaExclude)
