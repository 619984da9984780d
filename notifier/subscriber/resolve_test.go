package subscriber

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/dropstream/dropstream/internal/testenv"
)

func TestStore_ResolveManySeesEveryChange(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	st := newStore(t, dial(t, "redis://"+miniredis.RunT(t).Addr()), &now)
	c, err := st.Create(ctx, alice())
	if err != nil {
		t.Fatal(err)
	}
	id := c.Subscriber.ID
	for _, step := range []struct {
		name   string
		change func() error
		want   func(Subscriber) bool
	}{
		{"created", func() error { return nil }, func(s Subscriber) bool { return s.Destinations[0].Status == StatusPending }},
		{"read again", func() error { return nil }, func(s Subscriber) bool { return s.Destinations[0].Status == StatusPending }},
		{"confirmed", func() error {
			_, _, err := st.Confirm(ctx, c.ConfirmTokens[c.Subscriber.Destinations[0].ID])
			return err
		}, func(s Subscriber) bool { return s.Destinations[0].Status == StatusActive }},
		{"preferences", func() error {
			_, err := st.SetPreferences(ctx, id, "UTC", Preferences{Exclude: []string{"x"}})
			return err
		}, func(s Subscriber) bool { return s.TimeZone == "UTC" && len(s.Preferences.Exclude) == 1 }},
		{"deleted", func() error { return st.Delete(ctx, id) }, nil},
	} {
		if err := step.change(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		got, err := st.ResolveMany(ctx, []string{id})
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		s, ok := got[id]
		if step.want == nil && ok || step.want != nil && (!ok || !step.want(s)) {
			t.Errorf("%s: resolved %+v (found %v)", step.name, s, ok)
		}
	}
}

// BenchmarkResolveMany resolves the 64 subscribers of a delivery batch,
// each read before (the decoded records are reused): allocations per batch.
func BenchmarkResolveMany(b *testing.B) {
	ctx := context.Background()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	st := newStore(b, dial(b, testenv.RedisURL(b)), &now) // redis-server: its allocations stay out
	ids := make([]string, 64)
	for i := range ids {
		s := alice()
		s.Destinations[0].Address = fmt.Sprintf("alice+%d@example.com", i)
		s.Destinations[1].Address = fmt.Sprintf("https://example.com/hook/%d", i)
		c, err := st.Create(ctx, s)
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = c.Subscriber.ID
	}
	b.ReportAllocs()
	for b.Loop() {
		if got, err := st.ResolveMany(ctx, ids); err != nil || len(got) != len(ids) {
			b.Fatalf("resolved %d of %d: %v", len(got), len(ids), err)
		}
	}
}
