package benchstat

import (
	"testing"
	"time"
)

func TestCPU_PerItem(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name          string
		before, after CPU
		n             int
		want          CPU
	}{
		{"both", CPU{10 * ms, 20 * ms}, CPU{30 * ms, 60 * ms}, 10, CPU{2 * ms, 4 * ms}},
		{"redis unknown before", CPU{10 * ms, 0}, CPU{30 * ms, 60 * ms}, 10, CPU{2 * ms, 0}},
		{"redis unknown after", CPU{10 * ms, 20 * ms}, CPU{30 * ms, 0}, 10, CPU{2 * ms, 0}},
		{"no items", CPU{10 * ms, 20 * ms}, CPU{30 * ms, 60 * ms}, 0, CPU{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.after.PerItem(tt.before, tt.n); got != tt.want {
				t.Errorf("PerItem = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestCPU_String(t *testing.T) {
	got := CPU{Process: 1200 * time.Nanosecond, Redis: 42 * time.Microsecond}.String()
	if want := "1.2 µs in this process, 42.0 µs in Redis"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestQuantile_picksTheElementAtQTimesLength(t *testing.T) {
	sorted := []int{10, 20, 30, 40, 50, 60, 70, 80, 90, 100}
	for _, tt := range []struct {
		q    float64
		want int
	}{{0, 10}, {0.5, 60}, {0.9, 100}, {0.99, 100}, {1, 100}} {
		if got := Quantile(sorted, tt.q); got != tt.want {
			t.Errorf("Quantile(%v) = %d, want %d", tt.q, got, tt.want)
		}
	}
}

func TestSummarize_roundsAndAnswersZeroForNone(t *testing.T) {
	if got := Summarize(nil); got != (Latencies{}) {
		t.Errorf("Summarize(nil) = %s, want zero", got)
	}
	ds := []time.Duration{5678 * time.Microsecond, 1234 * time.Microsecond}
	want := Latencies{5680 * time.Microsecond, 5680 * time.Microsecond, 5680 * time.Microsecond}
	if got := Summarize(ds).Round(10 * time.Microsecond); got != want {
		t.Errorf("Summarize = %s, want %s", got, want)
	}
}
