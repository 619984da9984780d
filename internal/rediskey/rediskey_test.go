package rediskey_test

import (
	"testing"

	"github.com/dropstream/dropstream/internal/rediskey"
)

// The keys below are stored data: each want is a key a deployment already
// holds, so a change that fails here moves existing data.
func TestKey_buildsTheStoredKeyNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  string
		want string
	}{
		{"stream", rediskey.Key("{avail.3}", "raw"), "ds:{avail.3}:raw"},
		{"partition", rediskey.Partition("avail", 3, "raw"), "ds:{avail.3}:raw"},
		{"several parts", rediskey.Partition("avail", 0, "diff", "scope", "src|v|2025-07-04|2|"), "ds:{avail.0}:diff:scope:src|v|2025-07-04|2|"},
		{"ledger", rediskey.Key("{orders.1}", "ledger", "charge", "o-1"), "ds:{orders.1}:ledger:charge:o-1"},
		{"global tag", rediskey.Key(rediskey.Tag("notifier"), "throttle", "blocked"), "ds:{notifier}:throttle:blocked"},
		{"prefix", rediskey.Key(rediskey.Tag("notifier"), "history", ""), "ds:{notifier}:history:"},
		{"empty tag as concatenated", rediskey.Key("", "ledger", "n", "k"), "ds::ledger:n:k"},
		{"tag only", rediskey.Key("{x}"), "ds:{x}"},
		{"per-record tag", rediskey.Key(rediskey.Tag("src.s1"), "health"), "ds:{src.s1}:health"},
		{"empty", rediskey.Key(""), "ds:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Fatalf("got %q, want %q", tc.got, tc.want)
			}
		})
	}
}

func TestPartitionTag_namesFlowAndPartition(t *testing.T) {
	for _, tc := range []struct {
		flow string
		p    int
		want string
	}{
		{"avail", 0, "{avail.0}"},
		{"avail", 1023, "{avail.1023}"},
		{"notifier-events", 7, "{notifier-events.7}"},
	} {
		if got := rediskey.PartitionTag(tc.flow, tc.p); got != tc.want {
			t.Errorf("PartitionTag(%q, %d) = %q, want %q", tc.flow, tc.p, got, tc.want)
		}
	}
}

func BenchmarkPartition(b *testing.B) {
	for b.Loop() {
		_ = rediskey.Partition("avail", 12, "entity", "resy|venue|2025-07-04|19:00|2")
	}
}
