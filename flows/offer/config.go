package offer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dropstream/dropstream/internal/bounds"
	"github.com/dropstream/dropstream/internal/slug"
	"github.com/dropstream/dropstream/internal/tenancy"
	"github.com/dropstream/dropstream/internal/tick"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/stream"
)

// Name is the flow name: the prefix of its stages, topics and keys.
const Name = "offer"

// HandlerSpec is one handler service: its tag (1-32 characters of
// [a-z0-9_-]) and its pricing kind.
type HandlerSpec struct {
	Tag  string
	Kind Kind
}

// DefaultHandlers are three handlers of the two kinds.
var DefaultHandlers = []HandlerSpec{{"standard", KindStandard}, {"auction", KindAuction}, {"wholesale", KindStandard}}

// Config configures the offer flow. Zero fields take their defaults.
type Config struct {
	// Partitions of the fan-out topics and result keys. Default 8.
	Partitions int
	// Handlers are the handler services. Default DefaultHandlers.
	Handlers []HandlerSpec
	// ResultTTL is how long a complete result is served. Default 5m.
	ResultTTL time.Duration
	// ResultGrace is how long an expired result stays readable. Default 1m.
	ResultGrace time.Duration
	// ProcessingTimeout is how long a result may stay processing before a
	// new search computes it again. Default 3m.
	ProcessingTimeout time.Duration
	// MaxWait is how long a search waits before answering 202. Default 2s.
	MaxWait time.Duration
	// TranslateTTL is how long a TranslateIds cache record lives. Default 1h.
	TranslateTTL time.Duration
	// OrderPriceTTL is how long an orderPrice record is served. Default 10m.
	OrderPriceTTL time.Duration
	// ChangeLogLength caps each handler's change stream (approximately).
	// Default 100000.
	ChangeLogLength int64
	// FreshBound is the oldest change a served result may miss; while
	// Flow.RunFresh lags more, searches bypass the cache. Default 1s.
	FreshBound time.Duration
	// FreshBlock bounds the keeper's blocking read, at most FreshBound.
	// Default 500ms.
	FreshBlock time.Duration
	// Notify publishes standing searches' notifications; nil: none.
	Notify func(ctx context.Context, reqs ...notifier.Request) error
	// Subscriber returns nil when v sees subscriber id, else an error
	// wrapping subscriber.ErrNotFound; nil refuses every subscriber.
	Subscriber func(ctx context.Context, v tenancy.View, id string) error
	// MaxStandingPerCaller caps each API caller's standing searches. Default 100.
	MaxStandingPerCaller int
	// Runner tunes the handler stages: HandlerTimeout defaults to 15s,
	// other zero timings derive from ProcessingTimeout.
	Runner stream.RunnerConfig
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	c.Partitions = cmp.Or(c.Partitions, 8)
	if len(c.Handlers) == 0 {
		c.Handlers = DefaultHandlers
	}
	c.ResultTTL = cmp.Or(c.ResultTTL, 5*time.Minute)
	c.ResultGrace = cmp.Or(c.ResultGrace, time.Minute)
	c.ProcessingTimeout = cmp.Or(c.ProcessingTimeout, 3*time.Minute)
	c.MaxWait = cmp.Or(c.MaxWait, 2*time.Second)
	c.TranslateTTL = cmp.Or(c.TranslateTTL, time.Hour)
	c.OrderPriceTTL = cmp.Or(c.OrderPriceTTL, 10*time.Minute)
	c.ChangeLogLength = cmp.Or(c.ChangeLogLength, 100000)
	c.Now = tick.Or(c.Now)
	c.FreshBound = cmp.Or(c.FreshBound, time.Second)
	c.FreshBlock = cmp.Or(c.FreshBlock, min(500*time.Millisecond, c.FreshBound))
	c.MaxStandingPerCaller = cmp.Or(c.MaxStandingPerCaller, 100)
	c.Runner.HandlerTimeout = cmp.Or(c.Runner.HandlerTimeout, 15*time.Second)
	c.Runner = c.Runner.ForDeadline(c.ProcessingTimeout)
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c Config) Validate() error {
	var errs []error
	errs = bounds.Check(errs, "partitions", c.Partitions, 1, stream.MaxPartitions)
	seen := map[string]bool{}
	for _, h := range c.Handlers {
		if !slug.Valid(h.Tag, 32) || seen[h.Tag] || !h.Kind.Valid() {
			errs = append(errs, fmt.Errorf("handler %q (kind %q): want a unique tag of 1-32 [a-z0-9_-] and kind standard or auction", h.Tag, h.Kind))
		}
		seen[h.Tag] = true
	}
	if len(c.Handlers) > 16 {
		errs = append(errs, fmt.Errorf("%d handlers, at most 16", len(c.Handlers)))
	}
	for name, d := range map[string]time.Duration{"result ttl": c.ResultTTL, "result grace": c.ResultGrace,
		"processing timeout": c.ProcessingTimeout, "max wait": c.MaxWait, "translate ttl": c.TranslateTTL, "order price ttl": c.OrderPriceTTL} {
		if d < time.Millisecond {
			errs = append(errs, fmt.Errorf("%s %s below 1ms", name, d))
		}
	}
	if err := c.Runner.CheckDeadline("processing timeout", c.ProcessingTimeout); err != nil {
		errs = append(errs, fmt.Errorf("handler stages: %w", err))
	}
	errs = bounds.CheckText(errs, "fresh bound", c.FreshBound, 10*time.Millisecond, time.Hour, "10ms..1h")
	errs = bounds.CheckText(errs, "fresh block", c.FreshBlock, time.Millisecond, c.FreshBound, "1ms..fresh bound "+c.FreshBound.String())
	errs = bounds.Check(errs, "max standing searches per caller", c.MaxStandingPerCaller, 1, MaxStandingSearches)
	errs = bounds.AtLeast(errs, "change log length", c.ChangeLogLength, 100)
	return errors.Join(errs...)
}

// kindOf returns the kind of handler tag, or false when it is not configured.
func (c Config) kindOf(tag string) (Kind, bool) {
	for _, h := range c.Handlers {
		if h.Tag == tag {
			return h.Kind, true
		}
	}
	return "", false
}

// EvalTopic is a handler's fan-out topic, keyed by result id.
func (c Config) EvalTopic(handler string) stream.Topic {
	return stream.NewTopic(Name, "eval-"+handler, c.Partitions)
}

// HistoryTopic carries one entry per search, for ClickHouse.
func (c Config) HistoryTopic() stream.Topic {
	return stream.NewTopic(Name, "history", c.Partitions)
}

// resultTag returns the hash tag of a result's keys: that of its partition.
func (c Config) resultTag(resultID string) (int, string) {
	t := c.EvalTopic(c.Handlers[0].Tag)
	p := t.Partition(resultID)
	return p, t.HashTag(p)
}

// StageHistory writes the search history to ClickHouse.
const StageHistory = "offer-history"

// StageHandler is the name of a handler's stage.
func StageHandler(tag string) string { return "offer-handler-" + tag }
