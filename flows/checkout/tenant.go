package checkout

import (
	"github.com/dropstream/dropstream/internal/tenancy"
)

// The id of an item, user or order a tenant other than tenancy.Open
// created starts with the tenant's tenancy.Tag, then '_', so checking a
// call costs no Redis read; only the server makes ids.

// idTag returns the tenant tag an id starts with; "" is tenancy.Open's.
func idTag(id string) string {
	if len(id) <= tenancy.TagLen || id[tenancy.TagLen] != '_' || !tenancy.IsTag(id[:tenancy.TagLen]) {
		return ""
	}
	return id[:tenancy.TagLen]
}

// NewIDOf returns a new item, user or order id of tenant.
func NewIDOf(tenant string) string {
	if tag := tenancy.Tag(tenant); tag != "" {
		return tag + "_" + newID()
	}
	return newID()
}

// Sees reports whether v may see and change id; to others it does not
// exist.
func Sees(v tenancy.View, id string) bool {
	return v.All || idTag(id) == tenancy.Tag(v.Tenant)
}
