package checkout

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/dropstream/dropstream/internal/tenancy"
)

// tenantTagLen is the length of the tenant tag that starts the id of an
// item, user or order a tenant other than tenancy.Open created: 12 hex
// digits of the tenant name's SHA-256, then '_'.
//
// The tenant is written in the id, not beside it, so that checking a call
// against it costs no Redis read on the contract's hot path; ids are made
// by the server alone, so no caller can write another tenant's tag.
const tenantTagLen = 12

// tenantTag returns the tag of tenant's ids, "" for tenancy.Open.
func tenantTag(tenant string) string {
	if tenancy.Of(tenant) == tenancy.Open {
		return ""
	}
	sum := sha256.Sum256([]byte(tenant))
	return hex.EncodeToString(sum[:tenantTagLen/2])
}

// idTag returns the tenant tag an id starts with, "" for one without
// (tenancy.Open's: the batch routes' ids, and ids made before tenants).
func idTag(id string) string {
	if len(id) <= tenantTagLen || id[tenantTagLen] != '_' {
		return ""
	}
	for i := range tenantTagLen {
		if c := id[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return ""
		}
	}
	return id[:tenantTagLen]
}

// NewIDOf returns a new item, user or order id of tenant.
func NewIDOf(tenant string) string {
	if tag := tenantTag(tenant); tag != "" {
		return tag + "_" + newID()
	}
	return newID()
}

// Sees reports whether v may see and change the item, user or order id:
// every id when v sees all, else the ids of v's tenant. Another tenant's
// id then answers as an id that does not exist.
func Sees(v tenancy.View, id string) bool {
	return v.All || idTag(id) == tenantTag(v.Tenant)
}
