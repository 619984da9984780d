package stream_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dropstream/dropstream/stream"
)

func TestRunnerConfig_forDeadlineDerivesAValidTakeOver(t *testing.T) {
	for _, deadline := range []time.Duration{300 * time.Millisecond, time.Second, 30 * time.Second, 3 * time.Minute, 10 * time.Minute} {
		c := stream.RunnerConfig{}.ForDeadline(deadline)
		if err := c.CheckDeadline("wait", deadline); err != nil {
			t.Errorf("deadline %s: derived %+v refused: %v", deadline, c, err)
		}
		if err := c.WithDefaults("s").Validate(); err != nil {
			t.Errorf("deadline %s: derived %+v invalid: %v", deadline, c, err)
		}
		if c.ClaimIdle != deadline/3 {
			t.Errorf("deadline %s: claim idle %s, want a third of it", deadline, c.ClaimIdle)
		}
	}
	kept := stream.RunnerConfig{ClaimIdle: time.Second, HandlerTimeout: 100 * time.Millisecond}.ForDeadline(time.Minute)
	if kept.ClaimIdle != time.Second || kept.HandlerTimeout != 100*time.Millisecond || kept.ClaimInterval != 5*time.Second {
		t.Errorf("ForDeadline changed fields that were set or missed one: %+v", kept)
	}
}

func TestRunnerConfig_checkDeadlineRefusesALateTakeOver(t *testing.T) {
	tests := []struct {
		name     string
		cfg      stream.RunnerConfig
		deadline time.Duration
		refused  bool
	}{
		{"runtime defaults against a 30s wait", stream.RunnerConfig{}, 30 * time.Second, true},
		{"runtime defaults against a 70s wait", stream.RunnerConfig{}, 70 * time.Second, false},
		{"claim idle equal to the wait", stream.RunnerConfig{ClaimIdle: 30 * time.Second, ClaimInterval: time.Second}, 30 * time.Second, true},
		{"take-over at exactly half", stream.RunnerConfig{ClaimIdle: 14 * time.Second, ClaimInterval: time.Second}, 30 * time.Second, false},
		{"claim interval tips it over", stream.RunnerConfig{ClaimIdle: 14 * time.Second, ClaimInterval: 2 * time.Second}, 30 * time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.CheckDeadline("checkout timeout", tt.deadline)
			if tt.refused != errors.Is(err, stream.ErrDeadlineConflict) {
				t.Errorf("CheckDeadline = %v, want refused %v", err, tt.refused)
			}
		})
	}
}
