package main

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/flows/checkout"
	"github.com/dropstream/dropstream/internal/tenancy"
	"github.com/dropstream/dropstream/stream"
)

// TestExpireDemoEntities_createdExpireSeededAndRunKept creates checkout
// entities through the store, as the API does, beside seeded ones; after
// the demo's bound and 31 minutes, the created ones are gone in the demo
// and every one is kept where the bound does not run (`run`).
func TestExpireDemoEntities_createdExpireSeededAndRunKept(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bound bool
	}{
		{name: "demo", bound: true},
		{name: "run", bound: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			mr := miniredis.RunT(t)
			rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
			t.Cleanup(func() { _ = rdb.Close() })
			co, err := checkout.NewWith(rdb, nil, checkout.Config{}, stream.Telemetry{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = co.Close() })
			st := co.Store()
			keys := checkout.NewKeys(8)
			if err := st.BatchInitItems(ctx, 2, 5, 1); err != nil {
				t.Fatal(err)
			}
			item, err := st.CreateItemOf(ctx, tenancy.Open, 3)
			if err != nil {
				t.Fatal(err)
			}
			user, err := st.CreateUserOf(ctx, tenancy.Open)
			if err != nil {
				t.Fatal(err)
			}
			order, err := st.CreateOrder(ctx, user)
			if err != nil {
				t.Fatal(err)
			}
			created := []string{keys.Item(item), keys.User(user), keys.Order(order)}
			seeded := []string{keys.Item("0"), keys.Item("1")}
			if tc.bound {
				if err := expireDemoEntities(ctx, rdb, 30*time.Minute); err != nil {
					t.Fatal(err)
				}
			}
			mr.FastForward(31 * time.Minute)
			for _, k := range seeded {
				if !mr.Exists(k) {
					t.Errorf("seeded %s gone", k)
				}
			}
			for _, k := range created {
				if mr.Exists(k) == tc.bound {
					t.Errorf("created %s: exists %v after 31 minutes, want %v", k, mr.Exists(k), !tc.bound)
				}
			}
		})
	}
}

// TestExpireDemoEntities_keepsAShorterTTL: a TTL already set is left as it
// is.
func TestExpireDemoEntities_keepsAShorterTTL(t *testing.T) {
	ctx := context.Background()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	k := checkout.NewKeys(8).Order("0123456789abcdef01234567")
	mr.HSet(k, "paid", "0")
	mr.SetTTL(k, 5*time.Minute)
	if err := expireDemoEntities(ctx, rdb, 30*time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := mr.TTL(k); got != 5*time.Minute {
		t.Errorf("TTL %s, want 5m", got)
	}
}
