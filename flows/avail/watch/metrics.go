package watch

import (
	"fmt"
	"time"

	"go.opentelemetry.io/otel/metric"
)

// MetricUnresolvedSessions counts stable opens notified without a session
// id. Int64Counter, unit {transition}.
const MetricUnresolvedSessions = "dropstream.notifier.sessions.unresolved"

// instrumentationScope is the meter of the stage's own metric: the
// notifier's, where the metric has always been reported.
const instrumentationScope = "github.com/dropstream/dropstream/notifier"

// recordTimeout bounds the history write of the outcomes decided without
// a send, which runs even when the handler's context has ended.
const recordTimeout = 5 * time.Second

func newUnresolved(mp metric.MeterProvider) (metric.Int64Counter, error) {
	c, err := mp.Meter(instrumentationScope).Int64Counter(MetricUnresolvedSessions,
		metric.WithDescription("Stable opens notified without a session id: the raw open of their window was not seen."),
		metric.WithUnit("{transition}"))
	if err != nil {
		return nil, fmt.Errorf("notifier: metrics: %w", err)
	}
	return c, nil
}
