package stream

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestRunnerConfig_withDefaults(t *testing.T) {
	c := RunnerConfig{}.WithDefaults("enrich")
	want := RunnerConfig{
		Group:           "enrich",
		Consumer:        c.Consumer, // random, checked below
		BatchSize:       256,
		ReadBytes:       128 << 10,
		Block:           time.Second,
		ClaimInterval:   5 * time.Second,
		ClaimIdle:       30 * time.Second,
		MaxDeliveries:   5,
		HandlerTimeout:  5 * time.Second,
		StatsInterval:   2 * time.Second,
		ControlInterval: time.Second,
		ErrorBackoff:    2 * time.Second,
		ConsumerLease:   15 * time.Second,
		ConsumerIdle:    10 * time.Minute,
		Retry:           RetryConfig{MaxRetries: 2, InitialInterval: 50 * time.Millisecond, MaxInterval: time.Second},
	}
	if !unitConfigEqual(c, want) {
		t.Errorf("WithDefaults = %+v\nwant          %+v", c, want)
	}
	if c.Partitions != nil {
		t.Errorf("WithDefaults set Partitions = %v, want nil (all)", c.Partitions)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
	host, _ := os.Hostname()
	if host == "" {
		host = "dropstream"
	}
	pattern := "^" + regexp.QuoteMeta(host) + "-" + strconv.Itoa(os.Getpid()) + "-[0-9a-f]{8}$"
	if !regexp.MustCompile(pattern).MatchString(c.Consumer) {
		t.Errorf("default consumer %q does not match %s", c.Consumer, pattern)
	}
	if other := (RunnerConfig{}).WithDefaults("enrich").Consumer; other == c.Consumer {
		t.Errorf("two copies got the same default consumer name %q", other)
	}
}

func unitConfigEqual(a, b RunnerConfig) bool {
	return slices.Equal(a.Partitions, b.Partitions) && reflect.DeepEqual(
		func() RunnerConfig { a.Partitions = nil; return a }(),
		func() RunnerConfig { b.Partitions = nil; return b }())
}

func TestRunnerConfig_withDefaultsKeepsSetFields(t *testing.T) {
	in := RunnerConfig{
		Group: "g", Consumer: "c", BatchSize: 100, ReadBytes: 4096, Block: 2 * time.Second, ClaimInterval: time.Second,
		ClaimIdle: time.Minute, MaxDeliveries: 9, HandlerTimeout: 3 * time.Second, Partitions: []int{1, 3},
		StatsInterval: time.Second, ControlInterval: 3 * time.Second, ErrorBackoff: 5 * time.Second, Instance: "i", Copy: 2,
		ConsumerLease: time.Minute, ConsumerIdle: time.Hour,
		Retry: RetryConfig{MaxRetries: 4, InitialInterval: time.Millisecond, MaxInterval: 7 * time.Millisecond, Disabled: true},
	}
	if got := in.WithDefaults("stage"); !unitConfigEqual(got, in) {
		t.Errorf("WithDefaults changed set fields:\n got %+v\nwant %+v", got, in)
	}
	// Negative values are not defaults: they stay, and Validate rejects them.
	neg := RunnerConfig{BatchSize: -1, MaxDeliveries: -1, Retry: RetryConfig{MaxRetries: -1}}.WithDefaults("s")
	if neg.BatchSize != -1 || neg.MaxDeliveries != -1 || neg.Retry.MaxRetries != -1 {
		t.Errorf("WithDefaults replaced negative values: %+v", neg)
	}
	if err := neg.Validate(); err == nil {
		t.Error("Validate accepted negative batch size, max deliveries and retries")
	}
	// A partial retry config gets the missing defaults.
	r := RunnerConfig{Retry: RetryConfig{MaxInterval: 5 * time.Second}}.WithDefaults("s").Retry
	if r != (RetryConfig{MaxRetries: 2, InitialInterval: 50 * time.Millisecond, MaxInterval: 5 * time.Second}) {
		t.Errorf("partial retry config defaulted to %+v", r)
	}
}

func TestRunnerConfig_consumerName(t *testing.T) {
	tests := []struct {
		name string
		in   RunnerConfig
		want string // "" for a random per-copy name
	}{
		{"instance, first copy", RunnerConfig{Instance: "node-a"}, "node-a-enrich-0"},
		{"instance, third copy", RunnerConfig{Instance: "node-a", Copy: 2}, "node-a-enrich-2"},
		{"explicit consumer wins", RunnerConfig{Instance: "node-a", Consumer: "c"}, "c"},
		{"no instance", RunnerConfig{Copy: 1}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := tc.in.WithDefaults("enrich").Consumer, tc.in.WithDefaults("enrich").Consumer
			if tc.want != "" && (a != tc.want || b != tc.want) {
				t.Errorf("consumer names %q, %q; want %q for both", a, b, tc.want)
			}
			if tc.want == "" && a == b {
				t.Errorf("two copies without an instance both named %q", a)
			}
		})
	}
}

func TestRunnerConfig_validateRejectsEachBadField(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*RunnerConfig)
		want   string // a substring naming the field; "" when valid
	}{
		{"defaults", func(*RunnerConfig) {}, ""},
		{"empty group", func(c *RunnerConfig) { c.Group = "" }, "group"},
		{"empty consumer", func(c *RunnerConfig) { c.Consumer = "" }, "consumer"},
		{"batch size 0", func(c *RunnerConfig) { c.BatchSize = 0 }, "batch size 0"},
		{"batch size negative", func(c *RunnerConfig) { c.BatchSize = -5 }, "batch size -5"},
		{"batch size too big", func(c *RunnerConfig) { c.BatchSize = 10001 }, "batch size 10001"},
		{"batch size 1", func(c *RunnerConfig) { c.BatchSize = 1 }, ""},
		{"batch size 10000", func(c *RunnerConfig) { c.BatchSize = 10000 }, ""},
		{"read bytes too small", func(c *RunnerConfig) { c.ReadBytes = 1023 }, "read bytes 1023"},
		{"read bytes too big", func(c *RunnerConfig) { c.ReadBytes = 64<<20 + 1 }, "read bytes 67108865"},
		{"read bytes 1 KiB", func(c *RunnerConfig) { c.ReadBytes = 1 << 10 }, ""},
		{"read bytes 64 MiB", func(c *RunnerConfig) { c.ReadBytes = 64 << 20 }, ""},
		{"block 0", func(c *RunnerConfig) { c.Block = 0 }, "block"},
		{"block below 1ms", func(c *RunnerConfig) { c.Block = 999 * time.Microsecond }, "block"},
		{"block 1ms", func(c *RunnerConfig) { c.Block = time.Millisecond }, ""},
		{"claim interval 0", func(c *RunnerConfig) { c.ClaimInterval = 0 }, "claim interval"},
		{"claim interval negative", func(c *RunnerConfig) { c.ClaimInterval = -time.Second }, "claim interval"},
		{"claim idle equals handler timeout", func(c *RunnerConfig) { c.ClaimIdle = c.HandlerTimeout }, "claim idle"},
		{"claim idle below handler timeout", func(c *RunnerConfig) { c.ClaimIdle = time.Second }, "claim idle"},
		{"claim idle below the longest delivery", func(c *RunnerConfig) { c.ClaimIdle = 2 * c.HandlerTimeout }, "longest delivery"},
		{"claim idle just above the longest delivery", func(c *RunnerConfig) {
			tries := time.Duration(c.Retry.MaxRetries + 1)
			c.ClaimIdle = tries*c.HandlerTimeout + (tries-1)*c.Retry.MaxInterval + 1
		}, ""},
		{"max deliveries 0", func(c *RunnerConfig) { c.MaxDeliveries = 0 }, "max deliveries 0"},
		{"max deliveries negative", func(c *RunnerConfig) { c.MaxDeliveries = -1 }, "max deliveries -1"},
		{"max deliveries 1", func(c *RunnerConfig) { c.MaxDeliveries = 1 }, ""},
		{"handler timeout 0", func(c *RunnerConfig) { c.HandlerTimeout = 0 }, "handler timeout 0s must be positive"},
		{"handler timeout negative", func(c *RunnerConfig) { c.HandlerTimeout = -time.Second }, "handler timeout -1s must be positive"},
		{"stats interval 0", func(c *RunnerConfig) { c.StatsInterval = 0 }, "stats interval"},
		{"control interval negative", func(c *RunnerConfig) { c.ControlInterval = -time.Second }, "control interval"},
		{"error backoff negative", func(c *RunnerConfig) { c.ErrorBackoff = -1 }, "error backoff"},
		{"negative retries", func(c *RunnerConfig) { c.Retry.MaxRetries = -1 }, "retry"},
		{"retry initial interval 0", func(c *RunnerConfig) { c.Retry.InitialInterval = 0 }, "retry"},
		{"retry initial interval negative", func(c *RunnerConfig) { c.Retry.InitialInterval = -time.Millisecond }, "retry"},
		{"retry max interval below initial", func(c *RunnerConfig) {
			c.Retry.InitialInterval, c.Retry.MaxInterval = time.Second, time.Millisecond
		}, "retry"},
		{"retry max interval equals initial", func(c *RunnerConfig) {
			c.Retry.InitialInterval, c.Retry.MaxInterval = time.Second, time.Second
		}, ""},
		{"instance with a space", func(c *RunnerConfig) { c.Instance = "a b" }, "instance"},
		{"instance too long", func(c *RunnerConfig) { c.Instance = strings.Repeat("i", 65) }, "instance"},
		{"instance of 64 bytes", func(c *RunnerConfig) { c.Instance = strings.Repeat("i", 64) }, ""},
		{"negative copy", func(c *RunnerConfig) { c.Copy = -1 }, "copy -1"},
		{"consumer lease below 3ms", func(c *RunnerConfig) { c.ConsumerLease = 2 * time.Millisecond }, "consumer lease"},
		{"consumer idle below twice the block", func(c *RunnerConfig) { c.ConsumerIdle = c.Block }, "consumer idle"},
		{"consumer idle twice the block", func(c *RunnerConfig) { c.ConsumerIdle = 2 * c.Block }, ""},
		{"disabled retry ignores its other fields", func(c *RunnerConfig) {
			c.Retry = RetryConfig{MaxRetries: -1, InitialInterval: -1, MaxInterval: -2, Disabled: true}
		}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := RunnerConfig{Group: "g", Consumer: "c"}.WithDefaults("s")
			tc.modify(&c)
			err := c.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want an error naming %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %q, want it to name %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("one bad field gave several errors: %q", err)
			}
		})
	}
}

func TestRunnerConfig_validateReportsEveryBadField(t *testing.T) {
	c := RunnerConfig{Group: "", Consumer: "c", BatchSize: 0, ReadBytes: -1, Block: 0, ClaimInterval: 0, ClaimIdle: time.Second,
		MaxDeliveries: 0, HandlerTimeout: 2 * time.Second, StatsInterval: 0, ErrorBackoff: time.Second,
		Instance: "a b", Copy: -1, ConsumerLease: 0, ConsumerIdle: -1,
		Retry: RetryConfig{MaxRetries: -1, InitialInterval: time.Second, MaxInterval: time.Second}}
	err := c.Validate()
	if err == nil {
		t.Fatal("Validate() = nil")
	}
	for _, w := range []string{"group", "batch size", "read bytes", "block", "claim interval", "claim idle", "max deliveries",
		"stats interval", "retry", "instance", "copy", "consumer lease", "consumer idle"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Validate() = %q, does not name %q", err, w)
		}
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != 13 {
		t.Errorf("Validate() reported %d problems, want 13: %q", n, err)
	}
}
