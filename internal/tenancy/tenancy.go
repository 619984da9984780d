// Package tenancy says whose a stored object is and who may see it: a
// caller sees its tenant's objects, an admin or an open API sees all.
package tenancy

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Open is the one tenant of an open API (no keys configured). Objects
// stored without a tenant (before tenants were recorded) belong to it.
const Open = "open"

// Of returns the tenant of an object that records owner: owner itself, or
// Open for an object that records none.
func Of(owner string) string { return cmp.Or(owner, Open) }

// View is whose objects a call may see and change: its Tenant's, or every
// tenant's when All.
type View struct {
	// Tenant owns what the call creates.
	Tenant string
	// All lets the call see and change every tenant's objects.
	All bool
}

// Sees reports whether the view may see an object that records owner
// ("" for Open).
func (v View) Sees(owner string) bool { return v.All || Of(owner) == Of(v.Tenant) }

// Owner returns the tenant the view creates objects for.
func (v View) Owner() string { return Of(v.Tenant) }

// TagLen is the length of a Tag.
const TagLen = 12

// Tag returns the tag of a tenant's stored names: 12 hex digits of its
// SHA-256, or "" for Open.
func Tag(tenant string) string {
	if Of(tenant) == Open {
		return ""
	}
	sum := sha256.Sum256([]byte(tenant))
	return hex.EncodeToString(sum[:TagLen/2])
}

// IsTag reports whether s is a Tag of some tenant: TagLen lower-case hex
// digits.
func IsTag(s string) bool {
	return len(s) == TagLen && strings.Trim(s, "0123456789abcdef") == ""
}
