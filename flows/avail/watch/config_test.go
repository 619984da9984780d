package watch

import (
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/stream"
)

func TestConfig_validate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"defaults", Config{}, ""},
		{"test timings", Config{Runner: testRunner(), Ledger: notifier.DeliveryLedgerConfig{Lease: time.Second}}, ""},
		{"lease not below claim idle", Config{Ledger: notifier.DeliveryLedgerConfig{Lease: 3 * time.Minute}}, "below claim idle"},
		{"short window ttl", Config{WindowTTL: time.Second}, "window ttl"},
		{"one flip kept", Config{MaxWindowFlips: 1}, "max window flips"},
		{"tiny payload bound", Config{MaxPayloadBytes: 10}, "max payload"},
		{"no concurrency", Config{Concurrency: -1}, "concurrency"},
		{"too much concurrency", Config{Concurrency: 1000}, "concurrency"},
		{"claim idle below handler timeouts", Config{Runner: stream.RunnerConfig{ClaimIdle: 40 * time.Second}}, "claim idle"},
		{"bad ledger name", Config{Ledger: notifier.DeliveryLedgerConfig{Name: "A B"}}, "ledger"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.WithDefaults().Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Errorf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Validate = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestConfig_defaults(t *testing.T) {
	c := Config{}.WithDefaults()
	if c.Runner.HandlerTimeout != DefaultHandlerTimeout || c.Runner.ClaimIdle != notifier.DefaultClaimIdle ||
		c.Ledger != (notifier.DeliveryLedgerConfig{}).WithDefaults() || c.Concurrency != DefaultConcurrency ||
		c.WindowTTL != DefaultWindowTTL || c.MaxWindowFlips != DefaultMaxWindowFlips || c.MaxPayloadBytes != DefaultMaxPayloadBytes {
		t.Errorf("defaults: %+v", c)
	}
}

func TestNewStage_arguments(t *testing.T) {
	rdb := mini(t)
	store, err := NewStore(rdb, StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	channels, err := notifier.NewChannels(notifier.WebhookConfig{}, quiet)
	if err != nil || len(channels) != 2 || channels[notifier.ChannelWebhook].Name() != notifier.ChannelWebhook || channels[notifier.ChannelLog].Name() != notifier.ChannelLog {
		t.Fatalf("NewChannels = %v, %v", channels, err)
	}
	topics := avail.NewTopics(4)
	stage, err := NewStage(rdb, topics, store, channels, Config{}, stream.Telemetry{Logger: quiet})
	if err != nil {
		t.Fatalf("NewStage: %v", err)
	}
	if stage.Name != StageNotifier || stage.Topic != topics.Transitions || stage.Config.HandlerTimeout != DefaultHandlerTimeout {
		t.Errorf("stage %+v", stage)
	}
	for _, tt := range []struct {
		name     string
		store    *Store
		channels map[string]notifier.Channel
		cfg      Config
	}{
		{"no store", nil, channels, Config{}},
		{"no channels", store, nil, Config{}},
		{"misnamed channel", store, map[string]notifier.Channel{"email": notifier.NewLogChannel(quiet)}, Config{}},
		{"invalid config", store, channels, Config{Concurrency: -1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewStage(rdb, topics, tt.store, tt.channels, tt.cfg, stream.Telemetry{}); err == nil {
				t.Error("NewStage accepted it")
			}
		})
	}
}
