package stream

import (
	"cmp"
	"errors"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/dropstream/dropstream/internal/bounds"
	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/internal/settings"
)

// RunnerConfig tunes a stage runner. Zero fields take the defaults
// (WithDefaults); Validate checks the result.
type RunnerConfig struct {
	// Group is the consumer group. Default: the stage name.
	Group string
	// Consumer names this copy in the group. Default "<Instance>-<stage>-<Copy>"
	// when Instance is set, so a restarted process reads its own pending
	// entries first; else "<hostname>-<pid>-<random>". A newer copy under a
	// live name takes it over and the older one stops reading (LeaseErr).
	Consumer string
	// Instance is the process's identity across restarts
	// (DROPSTREAM_INSTANCE): at most 64 bytes, no spaces or control
	// characters. Default "".
	Instance string
	// Copy is this copy's index in the process. Default 0.
	Copy int `range:"0.."`
	// ConsumerLease is how long the hold on the consumer name lasts
	// unrenewed. It is renewed every ConsumerLease/3; the copy reads only
	// while its last renewal is younger than that. Default 15s.
	ConsumerLease time.Duration `default:"15s" range:"3ms.."`
	// ConsumerIdle is how long a consumer with nothing pending may idle
	// before it is deleted. Default 10m; at least 2 × Block.
	ConsumerIdle time.Duration `default:"10m"`
	// BatchSize is a read's COUNT. Default 256, at most MaxBatchSize.
	BatchSize int `default:"256" range:"1..10000"`
	// ReadBytes bounds a read's reply size, judged by the partition's last
	// entries. Default 128 KiB, from MinReadBytes to MaxReadBytes.
	ReadBytes int
	// Block is how long a read waits for new entries, and so how long
	// shutdown waits for an idle read. Default 1s.
	Block time.Duration `default:"1s" range:"1ms.."`
	// ClaimInterval is how often stale pending entries are claimed. Default 5s.
	ClaimInterval time.Duration `default:"5s"`
	// ClaimIdle is how long an entry stays pending before redelivery; it
	// must exceed the longest delivery (tries × HandlerTimeout plus retry
	// pauses). Default 30s.
	ClaimIdle time.Duration `default:"30s"`
	// MaxDeliveries is how many deliveries a message gets before it is
	// dead-lettered. Default 5.
	MaxDeliveries int `default:"5" range:"1.."`
	// HandlerTimeout bounds one handler call. Default 5s.
	HandlerTimeout time.Duration `default:"5s"`
	// Retry configures in-process retries before a message is left pending.
	Retry RetryConfig
	// Partitions restricts this copy to some partitions. Default: all.
	Partitions []int
	// StatsInterval is how often lag, pending and dead letters are
	// sampled. Default 2s.
	StatsInterval time.Duration `default:"2s"`
	// ControlInterval is how often the copy checks whether its stage is
	// paused (Control). Default 1s.
	ControlInterval time.Duration `default:"1s"`
	// ErrorBackoff caps the pause after a Redis error, which starts at
	// 50ms. Default 2s.
	ErrorBackoff time.Duration `default:"2s"`
}

// RetryConfig configures in-process retries of a failing handler, within
// one delivery (Attempt does not change).
type RetryConfig struct {
	// MaxRetries is the number of retries after the first call. Default 2.
	MaxRetries int
	// InitialInterval is the pause before the first retry. Default 50ms.
	InitialInterval time.Duration
	// MaxInterval caps the doubling pause. Default 1s.
	MaxInterval time.Duration
	// Disabled turns in-process retries off.
	Disabled bool
}

// WithDefaults returns c with every zero field set to its default.
func (c RunnerConfig) WithDefaults(stage string) RunnerConfig {
	c.Group = cmp.Or(c.Group, stage)
	if c.Consumer == "" && c.Instance != "" {
		c.Consumer = c.Instance + "-" + stage + "-" + strconv.Itoa(c.Copy)
	}
	if c.Consumer == "" {
		c.Consumer = DefaultConsumerName()
	}
	settings.Defaults(&c)
	c.ReadBytes = cmp.Or(c.ReadBytes, DefaultReadBytes)
	c.Retry = c.Retry.withDefaults()
	return c
}

func (c RetryConfig) withDefaults() RetryConfig {
	c.MaxRetries = cmp.Or(c.MaxRetries, 2)
	if c.InitialInterval <= 0 {
		c.InitialInterval = 50 * time.Millisecond
	}
	if c.MaxInterval < c.InitialInterval {
		c.MaxInterval = max(time.Second, c.InitialInterval)
	}
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c RunnerConfig) Validate() error {
	errs := bounds.Require([]error{settings.Check("", &c)}, c.Group != "" && c.Consumer != "", "group and consumer must be set")
	errs = bounds.Check(errs, "read bytes", c.ReadBytes, MinReadBytes, MaxReadBytes)
	errs = bounds.Require(errs, c.ClaimInterval > 0, "claim interval %s must be positive", c.ClaimInterval)
	errs = bounds.Require(errs, c.ClaimIdle > c.worstDelivery(), "claim idle %s must exceed the longest delivery %s (handler timeout %s × %d tries, plus retry pauses)",
		c.ClaimIdle, c.worstDelivery(), c.HandlerTimeout, c.tries())
	errs = bounds.Require(errs, c.HandlerTimeout > 0, "handler timeout %s must be positive", c.HandlerTimeout)
	errs = bounds.Require(errs, len(c.Instance) <= maxInstanceLen && !strings.ContainsFunc(c.Instance, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }),
		"instance %q: want at most %d bytes without spaces or control characters", clip.String(c.Instance, maxInstanceLen), maxInstanceLen)
	errs = bounds.Require(errs, c.ConsumerIdle >= 2*c.Block, "consumer idle %s below twice the block %s", c.ConsumerIdle, c.Block)
	errs = bounds.Require(errs, c.StatsInterval > 0 && c.ErrorBackoff > 0 && c.ControlInterval > 0,
		"stats interval, control interval and error backoff must be positive")
	errs = bounds.Require(errs, c.Retry.Disabled || (c.Retry.MaxRetries >= 0 && c.Retry.InitialInterval > 0 && c.Retry.MaxInterval >= c.Retry.InitialInterval),
		"retry config %+v is inconsistent", c.Retry)
	return errors.Join(errs...)
}

// maxInstanceLen bounds RunnerConfig.Instance.
const maxInstanceLen = 64

// MaxBatchSize bounds RunnerConfig.BatchSize.
const MaxBatchSize = 10_000

// Bounds and default of RunnerConfig.ReadBytes.
const (
	DefaultReadBytes = 128 << 10
	MinReadBytes     = 1 << 10
	MaxReadBytes     = 64 << 20
)

// tries is how many handler calls one delivery may make.
func (c RunnerConfig) tries() int {
	if c.Retry.Disabled {
		return 1
	}
	return max(1, c.Retry.MaxRetries+1)
}

// worstDelivery is the longest one delivery may take.
func (c RunnerConfig) worstDelivery() time.Duration {
	return time.Duration(c.tries())*c.HandlerTimeout + time.Duration(c.tries()-1)*c.Retry.MaxInterval
}

// DefaultConsumerName returns "<hostname>-<pid>-<random>", unique per copy.
func DefaultConsumerName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "dropstream"
	}
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + randomSuffix()
}
