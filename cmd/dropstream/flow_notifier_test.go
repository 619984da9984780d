package main

import (
	"testing"

	"github.com/dropstream/dropstream/notifier"
)

func TestRun_notifierMaxInFlightMustBeAPositiveCount(t *testing.T) {
	for _, bad := range []string{"many", "0", "-3", "5000"} {
		t.Run(bad, func(t *testing.T) {
			clearEnv(t)
			t.Setenv("DROPSTREAM_NOTIFIER_MAX_IN_FLIGHT", bad)
			if _, err := deliverConfig(); err == nil {
				t.Errorf("deliverConfig with DROPSTREAM_NOTIFIER_MAX_IN_FLIGHT=%s: no error", bad)
			}
		})
	}
	clearEnv(t)
	t.Setenv("DROPSTREAM_NOTIFIER_MAX_IN_FLIGHT", "256")
	if cfg, err := deliverConfig(); err != nil || cfg.MaxInFlight != 256 || cfg.PublicURL != notifier.DefaultPublicURL {
		t.Errorf("deliverConfig = %+v, %v; want MaxInFlight 256 and the default public URL", cfg, err)
	}
}
