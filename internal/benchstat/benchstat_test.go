package benchstat

import (
	"flag"
	"math"
	"strings"
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

type tagged struct {
	N     int           `flag:"n" default:"5" range:"1..10" help:"a count"`
	Every time.Duration `flag:"every-time" default:"2s" range:"1s.."`
	Share float64       `range:"0..1"`
	Plain string        `default:"x"`
}

func TestDefaults_fillOnlyZeroFields(t *testing.T) {
	c := tagged{N: 7}
	Defaults(&c)
	if c != (tagged{N: 7, Every: 2 * time.Second, Plain: "x"}) {
		t.Errorf("Defaults = %+v", c)
	}
}

func TestBindFlags_startAtTheDefaultsAndParse(t *testing.T) {
	var c tagged
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	BindFlags(fs, &c)
	if c.N != 5 || c.Every != 2*time.Second || fs.Lookup("n").DefValue != "5" || fs.Lookup("plain") != nil {
		t.Fatalf("bound %+v, n's default %q", c, fs.Lookup("n").DefValue)
	}
	if err := fs.Parse([]string{"--n", "3", "--every-time", "5s"}); err != nil || c.N != 3 || c.Every != 5*time.Second {
		t.Errorf("parsed %+v, %v", c, err)
	}
}

func TestCheck_namesEachFieldOutOfRange(t *testing.T) {
	if err := Check("t", &tagged{N: 10, Every: time.Second, Share: 1}); err != nil {
		t.Errorf("bounds rejected: %v", err)
	}
	err := Check("t", &tagged{N: 11, Every: time.Millisecond, Share: math.NaN()})
	for _, want := range []string{"t: n 11 out of range 1..10", "t: every time 1ms out of range 1s..", "t: share NaN out of range 0..1"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check = %v, want %q", err, want)
		}
	}
}
