package notifier

import (
	"testing"
	"time"
)

func TestDeliverConfig_defaultsValidate(t *testing.T) {
	def := DeliverConfig{}.WithDefaults()
	if err := def.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if def.Concurrency != DefaultDeliverConcurrency || def.MaxInFlight != DefaultMaxInFlight {
		t.Fatalf("defaults: concurrency %d, max in flight %d", def.Concurrency, def.MaxInFlight)
	}
	tests := []struct {
		name string
		c    DeliverConfig
	}{
		{"concurrency", DeliverConfig{Concurrency: 5000}},
		{"max in flight", DeliverConfig{MaxInFlight: 5000}},
		{"lease above claim idle", DeliverConfig{Ledger: DeliveryLedgerConfig{Lease: 10 * time.Minute}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.c.WithDefaults().Validate() == nil {
				t.Fatalf("%+v validated", tt.c)
			}
		})
	}
}
