package pollgate

import (
	"context"
	"testing"
	"time"

	"github.com/dropstream/dropstream/internal/testenv"
)

func newGate(t *testing.T, b testenv.Backend, owner string) (*Gate, *Gate) {
	t.Helper()
	rdb := b.Client(t)
	a, err := New(rdb, Config{Owner: owner, Spread: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	other, err := New(rdb, Config{Owner: owner + "-other", Spread: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return a, other
}

// within reports whether d is in [lo, hi].
func within(d, lo, hi time.Duration) bool { return d >= lo && d <= hi }

func TestGate_oneCopyPollsWhileTheGateIsClosed(t *testing.T) {
	for _, b := range testenv.WithCluster() {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			a, other := newGate(t, b, "copy-a")
			key := "ds:{avail.3}:gate:src|scope"

			ok, wait, err := a.Take(ctx, key, time.Minute)
			if err != nil || !ok || wait != 0 {
				t.Fatalf("first Take = %v, %v, %v; want true, 0, nil", ok, wait, err)
			}
			ok, wait, err = other.Take(ctx, key, time.Minute)
			if err != nil || ok {
				t.Fatalf("Take of a closed gate = %v, %v; want false", ok, err)
			}
			if !within(wait, 59*time.Second, time.Minute+10*time.Millisecond) {
				t.Errorf("wait on a gate closed for a minute = %v, want about a minute plus at most the spread", wait)
			}
			if ok, _, _ := a.Take(ctx, key, time.Minute); ok {
				t.Error("the copy holding the gate took it again")
			}

			// The poll is done: the next is due in 2h.
			next, err := a.Hold(ctx, key, 2*time.Hour)
			if err != nil || !within(next, 2*time.Hour, 2*time.Hour+10*time.Millisecond) {
				t.Fatalf("Hold = %v, %v; want 2h plus at most the spread", next, err)
			}
			if _, wait, _ := other.Take(ctx, key, time.Minute); !within(wait, 2*time.Hour-time.Second, 2*time.Hour+10*time.Millisecond) {
				t.Errorf("wait after Hold(2h) = %v, want about 2h", wait)
			}

			// Hold by a copy that does not hold the gate changes nothing.
			if _, err := other.Hold(ctx, key, time.Millisecond); err != nil {
				t.Fatal(err)
			}
			if ok, wait, _ := other.Take(ctx, key, time.Minute); ok || wait < time.Hour {
				t.Errorf("after a foreign Hold: Take = %v, wait %v; want still closed for about 2h", ok, wait)
			}

			// Open by another copy changes nothing; by the holder, opens.
			if err := other.Open(ctx, key); err != nil {
				t.Fatal(err)
			}
			if ok, _, _ := other.Take(ctx, key, time.Minute); ok {
				t.Error("a foreign Open opened the gate")
			}
			if err := a.Open(ctx, key); err != nil {
				t.Fatal(err)
			}
			if ok, _, err := other.Take(ctx, key, time.Minute); err != nil || !ok {
				t.Errorf("Take after the holder opened = %v, %v; want true", ok, err)
			}
		})
	}
}

func TestGate_opensWhenTheHoldEnds(t *testing.T) {
	ctx := context.Background()
	rdb := testenv.Dial(t, testenv.RedisURL(t))
	a, err := New(rdb, Config{Owner: "a"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(rdb, Config{Owner: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if ok, _, err := a.Take(ctx, "gate", 50*time.Millisecond); err != nil || !ok {
		t.Fatalf("Take = %v, %v", ok, err)
	}
	// A copy that polled and died never holds the gate longer than its
	// Take's hold: another copy polls the item once it ends.
	testenv.WaitFor(t, 5*time.Second, func() bool {
		ok, _, err := b.Take(ctx, "gate", time.Minute)
		return err == nil && ok
	}, "the gate opened after its hold")
	if _, err := a.Hold(ctx, "gate", time.Hour); err != nil {
		t.Fatal(err)
	}
	if owner, err := rdb.Get(ctx, "gate").Result(); err != nil || owner != "b" {
		t.Errorf("gate owner after a late Hold of the first copy = %q, %v; want b", owner, err)
	}
	if ttl, err := rdb.PTTL(ctx, "gate").Result(); err != nil || ttl < 50*time.Second {
		t.Errorf("gate TTL after a late foreign Hold = %v, %v; want b's minute", ttl, err)
	}
}

func TestConfig_validate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"owner set", Config{Owner: "x"}, true},
		{"no owner", Config{}, false},
		{"negative spread", Config{Owner: "x", Spread: -time.Second}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.cfg.WithDefaults().Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate() = %v, want ok %v", err, tt.ok)
			}
		})
	}
}
