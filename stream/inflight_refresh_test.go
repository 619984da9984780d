package stream

import (
	"context"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/testenv"
)

// TestRefreshScript_keepsOwnEntriesAndReportsTakenOnes runs the keeper's
// script on a batch larger than one page of XPENDING, some of whose
// entries another consumer took and some of which were redelivered, on
// both Redis servers.
func TestRefreshScript_keepsOwnEntriesAndReportsTakenOnes(t *testing.T) {
	for _, be := range testenv.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := context.Background()
			rdb := be.Client(t)
			const stream, group, me, other = "refresh-test", "g", "me", "other"
			if err := rdb.XGroupCreateMkStream(ctx, stream, group, "0").Err(); err != nil {
				t.Fatal(err)
			}
			var ids []string
			for i := range 2500 {
				id, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"n", i}}).Result()
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, id)
			}
			if err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: group, Consumer: me, Streams: []string{stream, ">"}, Count: 2500}).Err(); err != nil {
				t.Fatal(err)
			}
			taken := []string{ids[7], ids[1500], ids[2499]}
			if err := rdb.XClaimJustID(ctx, &redis.XClaimArgs{Stream: stream, Group: group, Consumer: other, Messages: taken}).Err(); err != nil {
				t.Fatal(err)
			}
			// Redelivered: a delivery count of 3.
			if err := rdb.Do(ctx, "XCLAIM", stream, group, me, 0, ids[10], ids[11], "RETRYCOUNT", 3, "JUSTID").Err(); err != nil {
				t.Fatal(err)
			}
			if err := rdb.XAck(ctx, stream, group, ids[20]).Err(); err != nil { // no longer pending
				t.Fatal(err)
			}
			args := []any{group, me, ids[0], ids[2499]}
			for _, id := range ids {
				args = append(args, id)
			}
			lost, err := refreshScript.Run(ctx, rdb, []string{stream}, args...).StringSlice()
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(lost)
			want := append(slices.Clone(taken), ids[20])
			slices.Sort(want)
			if !slices.Equal(lost, want) {
				t.Fatalf("lost %v, want %v", lost, want)
			}
			pending, err := rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: stream, Group: group, Start: "-", End: "+", Count: 3000}).Result()
			if err != nil {
				t.Fatal(err)
			}
			owner, count := map[string]string{}, map[string]int64{}
			for _, p := range pending {
				owner[p.ID], count[p.ID] = p.Consumer, p.RetryCount
			}
			for i, id := range ids {
				wantOwner, wantCount := me, int64(1)
				switch {
				case slices.Contains(taken, id):
					if owner[id] != other {
						t.Fatalf("entry %d: owner %q, want %q", i, owner[id], other)
					}
					continue
				case i == 10 || i == 11:
					wantCount = 3
				case i == 20:
					wantOwner, wantCount = "", 0
				}
				if owner[id] != wantOwner || count[id] != wantCount {
					t.Fatalf("entry %d: owner %q, delivery count %d; want %q, %d", i, owner[id], count[id], wantOwner, wantCount)
				}
			}
		})
	}
}
