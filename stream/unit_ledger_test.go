package stream

import (
	"strings"
	"testing"
	"time"
)

func TestLedgerConfig_validate(t *testing.T) {
	tests := []struct {
		name string
		cfg  LedgerConfig
		want string // substring of the error; "" when valid
	}{
		{"valid", LedgerConfig{Name: "apply-avail", TTL: time.Hour}, ""},
		{"ttl exactly 1s", LedgerConfig{Name: "x", TTL: time.Second}, ""},
		{"64 character name", LedgerConfig{Name: strings.Repeat("n", 64), TTL: time.Hour}, ""},
		{"empty name", LedgerConfig{Name: "", TTL: time.Hour}, "ledger name"},
		{"upper case", LedgerConfig{Name: "Apply", TTL: time.Hour}, "ledger name"},
		{"colon would split the key", LedgerConfig{Name: "a:b", TTL: time.Hour}, "ledger name"},
		{"brace would change the hash tag", LedgerConfig{Name: "a{b}", TTL: time.Hour}, "ledger name"},
		{"65 character name", LedgerConfig{Name: strings.Repeat("n", 65), TTL: time.Hour}, "ledger name"},
		{"ttl below 1s", LedgerConfig{Name: "x", TTL: 999 * time.Millisecond}, "below 1s"},
		{"ttl zero before defaults", LedgerConfig{Name: "x"}, "below 1s"},
		{"negative ttl", LedgerConfig{Name: "x", TTL: -time.Hour}, "below 1s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestLedger_newDefaultsAndRejects(t *testing.T) {
	// NewLedger does not touch Redis: a nil client is enough here.
	l, err := NewLedger(nil, LedgerConfig{Name: "apply"})
	if err != nil {
		t.Fatal(err)
	}
	if l.cfg.TTL != 7*24*time.Hour || l.ttl != "604800000" {
		t.Errorf("default ttl %s (%q ms), want 7 days", l.cfg.TTL, l.ttl)
	}
	l, err = NewLedger(nil, LedgerConfig{Name: "apply", TTL: 1500 * time.Millisecond})
	if err != nil || l.ttl != "1500" {
		t.Errorf("ttl 1.5s: ledger %+v, err %v; want PX 1500", l, err)
	}
	for _, cfg := range []LedgerConfig{{Name: ""}, {Name: "Bad"}, {Name: "x", TTL: time.Millisecond}} {
		if l, err := NewLedger(nil, cfg); err == nil || l != nil {
			t.Errorf("NewLedger(%+v) = %v, %v; want an error", cfg, l, err)
		}
	}
}

func TestLedger_keyShape(t *testing.T) {
	l, err := NewLedger(nil, LedgerConfig{Name: "apply"})
	if err != nil {
		t.Fatal(err)
	}
	topic := NewTopic("avail", "raw", 8)
	tests := []struct {
		tag, business, want string
	}{
		{topic.HashTag(3), "order-1", "ds:{avail.3}:ledger:apply:order-1"},
		{topic.HashTag(0), "", "ds:{avail.0}:ledger:apply:"},
		// Braces in the business key do not change the slot: the first
		// "{...}" of the key is the partition's tag.
		{topic.HashTag(5), "{other.1}", "ds:{avail.5}:ledger:apply:{other.1}"},
	}
	for _, tc := range tests {
		got := l.Key(tc.tag, tc.business)
		if got != tc.want {
			t.Errorf("Key(%q, %q) = %q, want %q", tc.tag, tc.business, got, tc.want)
		}
		if "{"+unitClusterHashTag(got)+"}" != tc.tag {
			t.Errorf("Key(%q, %q) = %q is not in the partition's slot", tc.tag, tc.business, got)
		}
	}
}

func TestLedger_newEffectWrapsBody(t *testing.T) {
	body := `return redis.call('HINCRBY', KEYS[1], ARGV[1], 1)`
	a, b, other := NewEffect(body), NewEffect(body), NewEffect(`return 1`)
	if a.script.Hash() != b.script.Hash() {
		t.Error("the same body gave two scripts")
	}
	if a.script.Hash() == other.script.Hash() {
		t.Error("different bodies gave the same script")
	}
	if len(a.script.Hash()) != 40 {
		t.Errorf("script hash %q is not a SHA1", a.script.Hash())
	}
}
