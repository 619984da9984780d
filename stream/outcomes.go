package stream

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	dsotel "github.com/dropstream/dropstream/otel"
)

// outcomeCounter reports dropstream.stage.messages: messages a stage
// handled, by outcome. It is added to once per batch, not per message.
type outcomeCounter struct {
	counter metric.Int64Counter
	opts    [5][]metric.AddOption
}

// outcomeIndex orders the outcomes in outcomeCounts.
var outcomeIndex = map[Outcome]int{OutcomeAcked: 0, OutcomeDropped: 1, OutcomeDeadLettered: 2, OutcomeFailed: 3, OutcomeDelayed: 4}

// outcomeCounts tallies one batch.
type outcomeCounts [5]int64

func (c *outcomeCounts) count(o Outcome) { c[outcomeIndex[o]]++ }

func newOutcomeCounter(mp metric.MeterProvider, info StageInfo) *outcomeCounter {
	counter, _ := mp.Meter(instrumentationScope).Int64Counter(dsotel.MetricStageMessages,
		metric.WithDescription("Messages handled by a stage, by outcome."), metric.WithUnit(dsotel.UnitMessages))
	c := &outcomeCounter{counter: counter}
	for o, i := range outcomeIndex {
		c.opts[i] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(
			dsotel.StageKey.String(info.Stage), dsotel.StreamKey.String(info.Topic.String()), dsotel.OutcomeKey.String(string(o))))}
	}
	return c
}

// add reports a batch's tally.
func (c *outcomeCounter) add(counts *outcomeCounts) {
	for i, n := range counts {
		if n > 0 {
			c.counter.Add(context.Background(), n, c.opts[i]...)
		}
	}
}
