package stream

import (
	"context"
	"maps"
	"reflect"
	"time"
	"unsafe"

	"github.com/alicebob/miniredis/v2"

	"github.com/dropstream/dropstream/internal/tick"
)

// BoundTTLs cuts, every period until ctx ends, any TTL of the embedded
// Redis longer than maxTTL to maxTTL (keys without a TTL are left alone):
// records kept "for a week" would otherwise grow the process's heap. A
// ledger's idempotence window becomes maxTTL, so choose it longer than any
// redelivery the process can see. Each period also drops what the server
// keeps of deleted keys (pruneKeyVersions).
func (e *Embedded) BoundTTLs(ctx context.Context, maxTTL, period time.Duration) {
	tick.Every(ctx, period, func() { e.boundTTLs(maxTTL) })
}

func (e *Embedded) boundTTLs(maxTTL time.Duration) {
	pruneKeyVersions(e.srv)
	for _, k := range e.srv.Keys() {
		if e.srv.TTL(k) > maxTTL {
			e.srv.SetTTL(k, maxTTL)
		}
	}
}

// pruneKeyVersions drops the WATCH versions miniredis keeps of keys that no
// longer exist, else the heap grows with every key ever written, and returns
// how many went; dropstream never WATCHes. If a miniredis release changes
// the fields it reads, it prunes nothing and its test fails.
func pruneKeyVersions(srv *miniredis.Miniredis) int {
	db := srv.DB(0) // takes and releases the server's lock
	srv.Lock()
	defer srv.Unlock()
	v := reflect.ValueOf(db).Elem()
	keysField, versionsField := v.FieldByName("keys"), v.FieldByName("keyVersion")
	if !keysField.IsValid() || !versionsField.IsValid() ||
		keysField.Type() != reflect.TypeFor[map[string]string]() || versionsField.Type() != reflect.TypeFor[map[string]uint]() {
		return 0
	}
	keys := *(*map[string]string)(unsafe.Pointer(keysField.UnsafeAddr()))
	versions := *(*map[string]uint)(unsafe.Pointer(versionsField.UnsafeAddr()))
	before := len(versions)
	maps.DeleteFunc(versions, func(k string, _ uint) bool {
		_, ok := keys[k]
		return !ok
	})
	return before - len(versions)
}
