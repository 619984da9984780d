package stream

import (
	"reflect"
	"unsafe"

	"github.com/alicebob/miniredis/v2"
)

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
	n := 0
	for k := range versions {
		if _, ok := keys[k]; !ok {
			delete(versions, k)
			n++
		}
	}
	return n
}
