package offer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dropstream/dropstream/internal/bounds"
	"github.com/dropstream/dropstream/internal/settings"
	"github.com/dropstream/dropstream/internal/slug"
	"github.com/dropstream/dropstream/internal/tenancy"
	"github.com/dropstream/dropstream/internal/tick"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/stream"
)

// Name is the flow name: the prefix of its stages, topics and keys.
const Name = "offer"

// HandlerSpec is a handler service: tag (1-32 of [a-z0-9_-]) and pricing kind.
type HandlerSpec struct {
	Tag  string
	Kind Kind
}

// DefaultHandlers are three handlers of the two kinds.
var DefaultHandlers = []HandlerSpec{{"standard", KindStandard}, {"auction", KindAuction}, {"wholesale", KindStandard}}

// Config configures the offer flow. Zero fields take their defaults.
type Config struct {
	// Partitions of the fan-out topics and result keys. Default 8.
	Partitions int `default:"8"`
	// Handlers are the handler services. Default DefaultHandlers.
	Handlers []HandlerSpec
	// ResultTTL is how long a complete result is served. Default 5m.
	ResultTTL time.Duration `default:"5m" range:"1ms.."`
	// ResultGrace is how long an expired result stays readable. Default 1m.
	ResultGrace time.Duration `default:"1m" range:"1ms.."`
	// ProcessingTimeout is when a search computes a processing result again.
	ProcessingTimeout time.Duration `default:"3m" range:"1ms.."`
	// MaxWait is how long a search waits before answering 202. Default 2s.
	MaxWait time.Duration `default:"2s" range:"1ms.."`
	// TranslateTTL is how long a TranslateIds cache record lives. Default 1h.
	TranslateTTL time.Duration `default:"1h" range:"1ms.."`
	// OrderPriceTTL is how long an orderPrice record is served. Default 10m.
	OrderPriceTTL time.Duration `default:"10m" range:"1ms.."`
	// ChangeLogLength caps each handler's change stream (approximately).
	ChangeLogLength int64 `default:"100000" range:"100.."`
	// FreshBound is the oldest change a served result may miss; while
	// Flow.RunFresh lags more, searches bypass the cache. Default 1s.
	FreshBound time.Duration `default:"1s" range:"10ms..1h"`
	// FreshBlock bounds the keeper's blocking read. Default 500ms.
	FreshBlock time.Duration `range:"1ms..FreshBound"`
	// Notify publishes standing searches' notifications; nil: none.
	Notify func(ctx context.Context, reqs ...notifier.Request) error
	// Subscriber returns nil when v sees subscriber id, else an error
	// wrapping subscriber.ErrNotFound; nil refuses every subscriber.
	Subscriber func(ctx context.Context, v tenancy.View, id string) error
	// MaxStandingPerCaller caps each API caller's standing searches. Default 100.
	MaxStandingPerCaller int `default:"100"`
	// Runner tunes the handler stages (HandlerTimeout 15s; other zero
	// timings derive from ProcessingTimeout).
	Runner stream.RunnerConfig
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	settings.Defaults(&c)
	if len(c.Handlers) == 0 {
		c.Handlers = DefaultHandlers
	}
	c.Now = tick.Or(c.Now)
	c.FreshBlock = cmp.Or(c.FreshBlock, min(500*time.Millisecond, c.FreshBound))
	c.Runner.HandlerTimeout = cmp.Or(c.Runner.HandlerTimeout, 15*time.Second)
	c.Runner = c.Runner.ForDeadline(c.ProcessingTimeout)
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c Config) Validate() error {
	errs := bounds.Check([]error{settings.Check("", &c)}, "partitions", c.Partitions, 1, stream.MaxPartitions)
	seen := map[string]bool{}
	for _, h := range c.Handlers {
		errs = bounds.Require(errs, slug.Valid(h.Tag, 32) && !seen[h.Tag] && h.Kind.Valid(),
			"handler %q (kind %q): want a unique tag of 1-32 [a-z0-9_-] and kind standard or auction", h.Tag, h.Kind)
		seen[h.Tag] = true
	}
	errs = bounds.Require(errs, len(c.Handlers) <= 16, "%d handlers, at most 16", len(c.Handlers))
	if err := c.Runner.CheckDeadline("processing timeout", c.ProcessingTimeout); err != nil {
		errs = append(errs, fmt.Errorf("handler stages: %w", err))
	}
	errs = bounds.Check(errs, "max standing searches per caller", c.MaxStandingPerCaller, 1, MaxStandingSearches)
	return errors.Join(errs...)
}

// kindOf returns the kind of handler tag, or false when it is not configured.
func (c Config) kindOf(tag string) (Kind, bool) {
	i := slices.IndexFunc(c.Handlers, func(h HandlerSpec) bool { return h.Tag == tag })
	if i < 0 {
		return "", false
	}
	return c.Handlers[i].Kind, true
}

// EvalTopic is a handler's fan-out topic, keyed by result id.
func (c Config) EvalTopic(handler string) stream.Topic {
	return stream.NewTopic(Name, "eval-"+handler, c.Partitions)
}

// HistoryTopic carries one entry per search, for ClickHouse.
func (c Config) HistoryTopic() stream.Topic {
	return stream.NewTopic(Name, "history", c.Partitions)
}

// partition is the partition (key slot "{offer.p}") of a result or price id.
func (c Config) partition(id string) int { return c.EvalTopic(c.Handlers[0].Tag).Partition(id) }

// StageHistory writes the search history to ClickHouse.
const StageHistory = "offer-history"

// StageHandler is the name of a handler's stage.
func StageHandler(tag string) string { return "offer-handler-" + tag }
