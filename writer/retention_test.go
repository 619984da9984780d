package writer_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer"
)

func TestProjection_retainsEntitiesAfterTheirDate(t *testing.T) {
	soon := time.Now().UTC().AddDate(0, 0, 1).Format(time.DateOnly)
	tests := []struct {
		name    string
		date    string // "": an entity without a date (source health)
		retain  time.Duration
		want    writer.ApplyResult
		wantTTL bool // the keys expire
	}{
		{name: "a future date expires after it", date: soon, want: writer.ResultOpened, wantTTL: true},
		{name: "a past date is not stored", date: "2020-01-01", want: writer.ResultExpired},
		{name: "no date never expires", want: writer.ResultOpened},
		{name: "negative retention keeps everything", date: "2020-01-01", retain: -1, want: writer.ResultOpened},
	}
	for _, be := range backends(t) {
		for i, tt := range tests {
			t.Run(be.name+"/"+tt.name, func(t *testing.T) {
				ctx := t.Context()
				p, err := writer.NewProjection(be.rdb, writer.ProjectionConfig{Partitions: partitions, RetainAfterDate: tt.retain}, stream.Telemetry{})
				if err != nil {
					t.Fatalf("NewProjection: %v", err)
				}
				e := avail.Entity{Key: avail.SourceKey(fmt.Sprintf("src%d", i)), Kind: avail.EntitySource, Venue: fmt.Sprintf("src%d", i)}
				if tt.date != "" {
					e = slot(fmt.Sprintf("ret%d", i))
					e.Date = tt.date
					e.Key = avail.SlotKey(e.Provider, e.Venue, e.Date, e.Time, e.PartySize)
				}
				got, err := p.Apply(ctx, 0, transition(e, "open", 1, false))
				if err != nil || got != tt.want {
					t.Fatalf("Apply = %q, %v; want %q", got, err, tt.want)
				}
				st, err := p.Get(ctx, e.Key)
				if tt.want == writer.ResultExpired {
					if !errors.Is(err, writer.ErrNotFound) {
						t.Fatalf("Get of an expired entity = %+v, %v; want ErrNotFound", st, err)
					}
					return
				}
				if err != nil {
					t.Fatalf("Get: %v", err)
				}
				tag := avail.NewTopics(partitions).Transitions.HashTag(0)
				for _, key := range []string{"ds:" + tag + ":entity:" + e.Key, "ds:" + tag + ":sessions:" + e.Key} {
					ttl := be.rdb.PTTL(ctx, key).Val()
					if tt.wantTTL != (ttl > 0) || (tt.wantTTL && ttl > 10*24*time.Hour) {
						t.Fatalf("PTTL %s = %v, want expiring within the retention: %v", key, ttl, tt.wantTTL)
					}
				}
			})
		}
	}
}

func TestProjection_expiredEntitiesLeaveTheIndexes(t *testing.T) {
	for _, be := range backends(t) {
		t.Run(be.name, func(t *testing.T) {
			ctx := t.Context()
			p := newProjection(t, be.rdb, 0)
			topic := avail.NewTopics(partitions).Transitions
			var keys []string
			for v := range 6 {
				e := slot(fmt.Sprintf("sw%d", v))
				tr := transition(e, "open", 1, false)
				if _, err := p.Apply(ctx, topic.Partition(tr.ScopeKey), tr); err != nil {
					t.Fatalf("Apply: %v", err)
				}
				keys = append(keys, "ds:"+topic.HashTag(topic.Partition(tr.ScopeKey))+":entity:"+e.Key)
			}
			// Four hashes expire (deleted here, as expiry would).
			if err := be.rdb.Del(ctx, keys[:4]...).Err(); err != nil {
				t.Fatalf("DEL: %v", err)
			}
			// List skips and unindexes the two it meets first...
			items, _, err := p.List(ctx, writer.Filter{Provider: "resy"}, "", 2)
			if err != nil || len(items) != 0 {
				t.Fatalf("first page = %+v, %v; want nothing (its entities expired)", items, err)
			}
			// ...and Sweep the other two.
			removed, err := p.Sweep(ctx)
			if err != nil || removed != 2 {
				t.Fatalf("Sweep = %d, %v; want 2", removed, err)
			}
			if removed, err := p.Sweep(ctx); err != nil || removed != 0 {
				t.Fatalf("second Sweep = %d, %v; want 0", removed, err)
			}
			got := listAll(t, p, writer.Filter{State: writer.StateOpen}, 10, true)
			if len(got) != 2 {
				t.Fatalf("List after expiry = %v, want the 2 live entities", got)
			}
		})
	}
}
