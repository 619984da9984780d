package stream

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// versionCount is how many WATCH versions the embedded server keeps.
func versionCount(srv *miniredis.Miniredis) int {
	db := srv.DB(0)
	srv.Lock()
	defer srv.Unlock()
	f := reflect.ValueOf(db).Elem().FieldByName("keyVersion")
	if !f.IsValid() {
		return -1
	}
	return f.Len()
}

// The embedded server forgets deleted keys entirely once BoundTTLs runs,
// while a WATCH of a key that still exists still sees its change.
func TestEmbedded_prunesTheVersionsOfDeletedKeys(t *testing.T) {
	e, err := StartEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	ctx := context.Background()
	rdb, err := Dial(ctx, e.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	for i := range 1000 {
		k := "gone:" + strconv.Itoa(i)
		if err := rdb.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.Del(ctx, k).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.Set(ctx, "kept", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n := versionCount(e.srv); n < 1001 {
		t.Fatalf("%d versions before pruning, want the 1,001 key names written", n)
	}
	e.boundTTLs(time.Hour)
	if n := versionCount(e.srv); n != 1 {
		t.Errorf("%d versions after pruning, want 1 (the key that exists)", n)
	}
	// WATCH still works on the key that exists: a change made between
	// WATCH and EXEC aborts the transaction.
	err = rdb.Watch(ctx, func(tx *redis.Tx) error {
		if err := rdb.Set(ctx, "kept", "2", 0).Err(); err != nil {
			return err
		}
		_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error { return p.Set(ctx, "kept", "3", 0).Err() })
		return err
	}, "kept")
	if !errors.Is(err, redis.TxFailedErr) {
		t.Errorf("a watched key changed before EXEC: %v, want %v", err, redis.TxFailedErr)
	}
}
