package notifier

import (
	"testing"
	"time"
)

func TestDeliverConfig_defaultsValidate(t *testing.T) {
	if err := (DeliverConfig{}).WithDefaults().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	bad := DeliverConfig{Concurrency: 5000, Ledger: DeliveryLedgerConfig{Lease: 10 * time.Minute}}.WithDefaults()
	if bad.Validate() == nil {
		t.Fatal("concurrency 5000 and a lease above claim idle validated")
	}
}
