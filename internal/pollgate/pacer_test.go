package pollgate

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dropstream/dropstream/internal/testenv"
)

// Two copies (two pacers on one Redis) share each host's budget: the
// requests of both to one host get slots a spacing apart, another host is
// not held back, and a host left alone for a while starts afresh.
func TestEtiquette_pacerSpacesAHostsRequestsAcrossCopies(t *testing.T) {
	for _, b := range testenv.WithCluster() {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			rdb := b.Client(t)
			clock := testenv.NewClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
			var copies []*Pacer
			for range 2 {
				p, err := NewPacer(rdb, PacerConfig{Name: "feed", Spacing: 200 * time.Millisecond, MaxWait: time.Second, Now: clock.Now})
				if err != nil {
					t.Fatal(err)
				}
				copies = append(copies, p)
			}
			var waits []time.Duration
			for i := range 4 {
				w, err := copies[i%2].Reserve(ctx, "Example.org")
				if err != nil {
					t.Fatal(err)
				}
				waits = append(waits, w)
			}
			for i, w := range waits {
				if want := time.Duration(i) * 200 * time.Millisecond; w != want {
					t.Errorf("request %d to the host waits %v, want %v (one spacing after the one before, whichever copy)", i, w, want)
				}
			}
			if w, err := copies[1].Reserve(ctx, "other.example"); err != nil || w != 0 {
				t.Errorf("another host waits %v (%v), want 0", w, err)
			}
			// Queued past MaxWait: ErrBusy, and the queue still drains.
			for range 2 {
				_, _ = copies[0].Reserve(ctx, "example.org")
			}
			if _, err := copies[0].Reserve(ctx, "example.org"); !errors.Is(err, ErrBusy) {
				t.Errorf("a host queued past MaxWait: %v, want ErrBusy", err)
			}
			clock.Add(5 * time.Second)
			if w, err := copies[1].Reserve(ctx, "example.org"); err != nil || w != 0 {
				t.Errorf("after the queue drained: waits %v (%v), want 0", w, err)
			}
		})
	}
}

func TestPacerConfig_Validate(t *testing.T) {
	for _, c := range []PacerConfig{{}, {Name: "Feed"}, {Name: "feed", Spacing: -time.Second}, {Name: "feed", Spacing: time.Second, MaxWait: time.Millisecond}} {
		if err := c.WithDefaults().Validate(); err == nil {
			t.Errorf("%+v validated", c)
		}
	}
	if err := (PacerConfig{Name: "feed"}).WithDefaults().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}
