package stream

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestPermanent_nilIsNil(t *testing.T) {
	if err := Permanent(nil); err != nil {
		t.Fatalf("Permanent(nil) = %#v, want nil", err)
	}
	if IsPermanent(nil) {
		t.Error("IsPermanent(nil) = true")
	}
}

func TestPermanent_wrapsAndMarks(t *testing.T) {
	base := errors.New("bad input")
	p := Permanent(base)
	if !IsPermanent(p) {
		t.Fatal("IsPermanent(Permanent(err)) = false")
	}
	if !errors.Is(p, base) {
		t.Error("Permanent(err) does not wrap err")
	}
	if got := p.Error(); got != "permanent: bad input" {
		t.Errorf("Error() = %q, want %q", got, "permanent: bad input")
	}
	pf := Permanentf("field %s: %w", "x", base)
	if !IsPermanent(pf) || !errors.Is(pf, base) || pf.Error() != "permanent: field x: bad input" {
		t.Errorf("Permanentf = %q (permanent %v, wraps base %v)", pf, IsPermanent(pf), errors.Is(pf, base))
	}
}

func TestPermanent_idempotent(t *testing.T) {
	base := errors.New("bad")
	p := Permanent(base)
	wrapped := fmt.Errorf("stage x: %w", p)
	tests := []struct {
		name string
		in   error
	}{
		{"permanent", p},
		{"wrapped permanent", wrapped},
		{"joined with a permanent", errors.Join(errors.New("other"), p)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Permanent(tc.in)
			if got != tc.in {
				t.Errorf("Permanent(%q) = %q, want the same error back", tc.in, got)
			}
		})
	}
	// No double wrapping: exactly one permanentError in the chain.
	n := 0
	for e := error(Permanent(Permanent(wrapped))); e != nil; e = errors.Unwrap(e) {
		if _, ok := e.(*permanentError); ok {
			n++
		}
	}
	if n != 1 {
		t.Errorf("chain holds %d permanent markers, want 1", n)
	}
}

func TestPermanent_isPermanentThroughChains(t *testing.T) {
	base := errors.New("bad")
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"plain", base, false},
		{"wrapped plain", fmt.Errorf("a: %w", base), false},
		{"formatted with %v loses the mark", fmt.Errorf("a: %v", Permanent(base)), false},
		{"permanent", Permanent(base), true},
		{"one %w", fmt.Errorf("a: %w", Permanent(base)), true},
		{"two %w", fmt.Errorf("a: %w", fmt.Errorf("b: %w", Permanent(base))), true},
		{"multi %w", fmt.Errorf("a: %w and %w", base, Permanent(base)), true},
		{"joined", errors.Join(base, Permanent(base)), true},
		{"context error", context.Canceled, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsPermanent(tc.err); got != tc.want {
				t.Errorf("IsPermanent(%q) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

func TestClassify_outcomes(t *testing.T) {
	plain := errors.New("boom")
	tests := []struct {
		name string
		err  error
		want Outcome
	}{
		{"nil", nil, OutcomeAcked},
		{"ErrDrop", ErrDrop, OutcomeDropped},
		{"wrapped ErrDrop", fmt.Errorf("skip: %w", ErrDrop), OutcomeDropped},
		{"doubly wrapped ErrDrop", fmt.Errorf("a: %w", fmt.Errorf("b: %w", ErrDrop)), OutcomeDropped},
		{"ErrDrop text without wrapping", errors.New(ErrDrop.Error()), OutcomeFailed},
		{"permanent", Permanent(plain), OutcomeDeadLettered},
		{"wrapped permanent", fmt.Errorf("x: %w", Permanent(plain)), OutcomeDeadLettered},
		{"Permanentf", Permanentf("bad %d", 1), OutcomeDeadLettered},
		{"plain", plain, OutcomeFailed},
		{"wrapped plain", fmt.Errorf("x: %w", plain), OutcomeFailed},
		{"deadline", context.DeadlineExceeded, OutcomeFailed},
		{"panic", &PanicError{Value: "x"}, OutcomeFailed},
		{"max deliveries", Permanent(fmt.Errorf("%w: delivery 6 of 5", ErrMaxDeliveries)), OutcomeDeadLettered},
		// ErrDrop is checked first: a deliberate skip stays a skip even
		// when something along the way marks it permanent.
		{"permanent wrapping ErrDrop", Permanent(ErrDrop), OutcomeDropped},
		{"permanent wrapping wrapped ErrDrop", Permanent(fmt.Errorf("x: %w", ErrDrop)), OutcomeDropped},
		{"ErrDrop wrapping permanent", fmt.Errorf("%w: %w", ErrDrop, Permanent(plain)), OutcomeDropped},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Classify(tc.err); got != tc.want {
				t.Errorf("Classify(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
}

func TestRetryAfter_classifiedDelayedUnlessDropOrPermanent(t *testing.T) {
	base := errors.New("busy")
	tests := []struct {
		name      string
		err       error
		want      Outcome
		wantDelay time.Duration
	}{
		{"delayed", RetryAfter(base, time.Second), OutcomeDelayed, time.Second},
		{"wrapped", fmt.Errorf("stage: %w", RetryAfter(base, 2*time.Second)), OutcomeDelayed, 2 * time.Second},
		{"negative delay is none", RetryAfter(base, -time.Second), OutcomeDelayed, 0},
		{"bounded", RetryAfter(base, 1000*time.Hour), OutcomeDelayed, MaxRetryDelay},
		{"permanent wins", Permanent(RetryAfter(base, time.Second)), OutcomeDeadLettered, time.Second},
		{"drop wins", RetryAfter(fmt.Errorf("x: %w", ErrDrop), time.Second), OutcomeDropped, time.Second},
		{"plain failure", base, OutcomeFailed, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Classify(tc.err); got != tc.want {
				t.Errorf("Classify(%q) = %s, want %s", tc.err, got, tc.want)
			}
			d, _ := RetryDelay(tc.err)
			if d != tc.wantDelay {
				t.Errorf("RetryDelay(%q) = %s, want %s", tc.err, d, tc.wantDelay)
			}
			if !errors.Is(tc.err, base) && tc.name != "drop wins" {
				t.Errorf("%q does not wrap its cause", tc.err)
			}
		})
	}
	if RetryAfter(nil, time.Second) != nil {
		t.Error("RetryAfter(nil) is not nil")
	}
}

func TestGiveUp_delayedRetryAtLastDeliveryIsPermanent(t *testing.T) {
	h := GiveUp(3)(func(context.Context, *Message) error { return RetryAfter(errors.New("busy"), time.Second) })
	for attempt, want := range map[int]Outcome{1: OutcomeDelayed, 2: OutcomeDelayed, 3: OutcomeDeadLettered} {
		if got := Classify(h(context.Background(), &Message{Attempt: attempt})); got != want {
			t.Errorf("attempt %d: %s, want %s", attempt, got, want)
		}
	}
}
