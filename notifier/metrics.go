package notifier

import (
	"cmp"
	"errors"
	"fmt"
	"sync"

	gotel "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	dsotel "github.com/dropstream/dropstream/otel"
)

// instrumentationScope names the tracer and meter of this package.
const instrumentationScope = "github.com/dropstream/dropstream/notifier"

// Metric names of the notifier; Prometheus shows dots as underscores, plus
// _total for counters and _seconds for histograms.
const (
	// MetricNotifications counts notifications by flow, channel and outcome
	// (sent, duplicate or failed with error.type). Int64Counter.
	MetricNotifications = "dropstream.notifier.notifications"
	// MetricDeliveryDuration is one send's time, by flow, channel, outcome.
	MetricDeliveryDuration = "dropstream.notifier.delivery.duration"
	// MetricEndToEndLatency is the time from a change's run_at to its
	// delivery, by flow (and channel).
	MetricEndToEndLatency = dsotel.MetricEndToEndLatency
	// MetricResumed counts sends a crashed delivery left in flight that a
	// redelivery sent again (each may have arrived already), by flow, channel.
	MetricResumed = "dropstream.notifier.resumed"
)

// Values of the outcome attribute of MetricNotifications.
const (
	OutcomeSent      = "sent"
	OutcomeDuplicate = dsotel.OutcomeDuplicate
	OutcomeFailed    = "failed"
)

// Values of the error.type attribute of failed notifications.
const (
	errorRetryable = "retryable"
	errorPermanent = "permanent"
	errorInFlight  = "in_flight"
)

var (
	keyChannel   = attribute.Key("channel")
	keyErrorType = attribute.Key("error.type")
)

// instruments are the notifier's metrics.
type instruments struct {
	notifications metric.Int64Counter
	duration      metric.Float64Histogram
	e2e           metric.Float64Histogram
	resumed       metric.Int64Counter
}

func newInstruments(mp metric.MeterProvider) (*instruments, error) {
	mp = cmp.Or(mp, gotel.GetMeterProvider())
	m := mp.Meter(instrumentationScope)
	var in instruments
	var errs [4]error
	in.notifications, errs[0] = m.Int64Counter(MetricNotifications,
		metric.WithDescription("Notifications by flow, channel and outcome (sent, duplicate, failed)."),
		metric.WithUnit("{notification}"))
	in.duration, errs[1] = m.Float64Histogram(MetricDeliveryDuration,
		metric.WithDescription("Time of one send of a notification over its channel."), metric.WithUnit(dsotel.UnitSeconds))
	in.e2e, errs[2] = m.Float64Histogram(MetricEndToEndLatency,
		metric.WithDescription("Time from a change being observed to its delivery."), metric.WithUnit(dsotel.UnitSeconds))
	in.resumed, errs[3] = m.Int64Counter(MetricResumed,
		metric.WithDescription("Sends a stopped delivery left in flight, sent again by its redelivery."), metric.WithUnit("{notification}"))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, fmt.Errorf("notifier: metrics: %w", err)
	}
	return &in, nil
}

// outcomeAttrs caches the metrics' attribute sets, which cost a sort and a
// hash to build, as the option slices Add and Record take (a slice built
// per call was an allocation per measurement).
type outcomeAttrs struct {
	m sync.Map // outcomeKey → attrOpts
}

// outcomeKey names a set; an empty field is an attribute it lacks.
type outcomeKey struct{ flow, channel, outcome, errType string }

// attrOpts are one attribute set as options of Add and of Record.
type attrOpts struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

// get returns the attributes flow, channel, outcome and error.type when
// errType is not empty.
func (a *outcomeAttrs) get(flow, channel, outcome, errType string) attrOpts {
	return a.load(outcomeKey{flow, channel, outcome, errType})
}

// flow returns the attribute flow alone (of the end-to-end latency).
func (a *outcomeAttrs) flow(flow string) attrOpts { return a.load(outcomeKey{flow: flow}) }

// flowChannel returns the attributes flow and channel.
func (a *outcomeAttrs) flowChannel(flow, channel string) attrOpts {
	return a.load(outcomeKey{flow: flow, channel: channel})
}

func (a *outcomeAttrs) load(k outcomeKey) attrOpts {
	if v, ok := a.m.Load(k); ok {
		return v.(attrOpts)
	}
	kvs := []attribute.KeyValue{dsotel.FlowKey.String(k.flow)}
	for _, kv := range []attribute.KeyValue{keyChannel.String(k.channel), dsotel.OutcomeKey.String(k.outcome), keyErrorType.String(k.errType)} {
		if kv.Value.AsString() != "" {
			kvs = append(kvs, kv)
		}
	}
	opt := metric.WithAttributeSet(attribute.NewSet(kvs...))
	o := attrOpts{add: []metric.AddOption{opt}, rec: []metric.RecordOption{opt}}
	a.m.Store(k, o)
	return o
}
