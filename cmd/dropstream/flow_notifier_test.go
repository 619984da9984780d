package main

import (
	"os"
	"testing"

	"github.com/dropstream/dropstream/flow"
)

func TestRun_notifierMaxInFlightMustBeAPositiveCount(t *testing.T) {
	cfg := Config{APIAddr: ":8080", Partitions: 8}
	for _, bad := range []string{"many", "0", "-3", "5000"} {
		t.Run(bad, func(t *testing.T) {
			clearEnv(t)
			t.Setenv("DROPSTREAM_NOTIFIER_MAX_IN_FLIGHT", bad)
			s, err := readSettings(cfg, os.LookupEnv)
			if err == nil {
				_, err = deliverConfig(s)
			}
			if err == nil {
				t.Errorf("settings with DROPSTREAM_NOTIFIER_MAX_IN_FLIGHT=%s: no error", bad)
			}
		})
	}
	clearEnv(t)
	t.Setenv("DROPSTREAM_NOTIFIER_MAX_IN_FLIGHT", "256")
	s, err := readSettings(cfg, os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := deliverConfig(s); err != nil || d.MaxInFlight != 256 || d.PublicURL != flow.DefaultPublicURL {
		t.Errorf("deliverConfig = %+v, %v; want MaxInFlight 256 and the default public URL", d, err)
	}
}
