package offer

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer/sink"
)

// instrumentationScope names the flow's tracer and meter.
const instrumentationScope = "github.com/dropstream/dropstream/flows/offer"

// Metric names of the flow. Prometheus writes dots as underscores and adds
// _total to counters and _seconds to durations.
const (
	MetricSearches         = "dropstream.offer.search.requests"        // searches by outcome
	MetricSearchDuration   = "dropstream.offer.search.duration"        // a search's time, by outcome and status
	MetricResultAge        = "dropstream.offer.result.age"             // age of a result served from the cache
	MetricFanoutLatency    = "dropstream.offer.fanout.latency"         // from a miss's fan-out to the last answer
	MetricHandlerAnswers   = "dropstream.offer.handler.answers"        // handler answers by handler and outcome
	MetricOrderPrices      = "dropstream.offer.order_price.requests"   // orderPrice lookups by outcome
	MetricHistoryDropped   = "dropstream.offer.history.dropped"        // history events dropped: buffer full
	MetricFreshDelay       = "dropstream.offer.fresh.delay"            // from an offer change to the keeper applying it
	MetricInvalidated      = "dropstream.offer.results.invalidated"    // cached results invalidated by offer changes
	MetricCacheBypass      = "dropstream.offer.cache.bypass"           // searches that bypassed the cache: the keeper lagged
	MetricStandingNotified = "dropstream.offer.standing.notifications" // standing-search notifications published
)

var (
	keyOutcome = attribute.Key("outcome")
	keyStatus  = attribute.Key("status")
	keyHandler = attribute.Key("handler")
)

type metrics struct {
	searches    metric.Int64Counter
	duration    metric.Float64Histogram
	age         metric.Float64Histogram
	fanout      metric.Float64Histogram
	answers     metric.Int64Counter
	orderPrices metric.Int64Counter
	dropped     metric.Int64Counter
	freshDelay  metric.Float64Histogram
	invalidated metric.Int64Counter
	bypass      metric.Int64Counter
	percolated  metric.Int64Counter
}

func newMetrics(mp metric.MeterProvider) *metrics {
	m := mp.Meter(instrumentationScope)
	var met metrics
	met.searches, _ = m.Int64Counter(MetricSearches, metric.WithDescription("Sell-offer searches by outcome (hit, join, miss, seen, gone)."), metric.WithUnit("{request}"))
	met.duration, _ = m.Float64Histogram(MetricSearchDuration, metric.WithDescription("Time a search spent in the manager."), metric.WithUnit("s"))
	met.age, _ = m.Float64Histogram(MetricResultAge, metric.WithDescription("Age of a logical result served from the cache."), metric.WithUnit("s"))
	met.fanout, _ = m.Float64Histogram(MetricFanoutLatency, metric.WithDescription("Time from a search's fan-out to the last handler's answer."), metric.WithUnit("s"))
	met.answers, _ = m.Int64Counter(MetricHandlerAnswers, metric.WithDescription("Handler answers by outcome (partial, complete, duplicate, stale)."), metric.WithUnit("{message}"))
	met.orderPrices, _ = m.Int64Counter(MetricOrderPrices, metric.WithDescription("orderPrice lookups by outcome (hit, miss, processing, search_hit)."), metric.WithUnit("{request}"))
	met.dropped, _ = m.Int64Counter(MetricHistoryDropped, metric.WithDescription("Search history events dropped: recorder buffer full."), metric.WithUnit("{event}"))
	met.freshDelay, _ = m.Float64Histogram(MetricFreshDelay, metric.WithDescription("Time from an offer change to its cached results invalidated and standing searches re-evaluated."), metric.WithUnit("s"))
	met.invalidated, _ = m.Int64Counter(MetricInvalidated, metric.WithDescription("Cached results invalidated by offer changes."), metric.WithUnit("{result}"))
	met.bypass, _ = m.Int64Counter(MetricCacheBypass, metric.WithDescription("Searches that bypassed the cache: the freshness keeper lagged past the bound."), metric.WithUnit("{request}"))
	met.percolated, _ = m.Int64Counter(MetricStandingNotified, metric.WithDescription("Standing-search change notifications published."), metric.WithUnit("{notification}"))
	return &met
}

// HistoryEvent is one search call, published to the history topic and
// written to ClickHouse by the "offer-history" stage.
type HistoryEvent struct {
	CallID      string    `json:"callId"`
	RequestID   string    `json:"requestId,omitempty"`
	ResultID    string    `json:"resultId"`
	At          time.Time `json:"at"`
	Outcome     string    `json:"outcome"`
	Status      string    `json:"status"`
	WaitMs      int64     `json:"waitMs"`
	Matches     int       `json:"matches"`
	ResultAgeMs int64     `json:"resultAgeMs,omitempty"`
	Filter      string    `json:"filter"`
	TraceID     string    `json:"traceId,omitempty"`
}

// Recorder bounds.
const (
	historyBuffer = 8192
	historyBatch  = 500
	historyFlush  = 50 * time.Millisecond
)

// recorder publishes history events off the request path, in batches.
type recorder struct {
	pub   *stream.Publisher
	topic stream.Topic
	met   *metrics
	log   *slog.Logger
	ch    chan HistoryEvent
	done  chan struct{}
	mu    sync.RWMutex // guards shut against record
	shut  bool
}

func newRecorder(pub *stream.Publisher, topic stream.Topic, met *metrics, log *slog.Logger) *recorder {
	r := &recorder{pub: pub, topic: topic, met: met, log: log, ch: make(chan HistoryEvent, historyBuffer), done: make(chan struct{})}
	go r.run()
	return r
}

// record queues an event, or drops and counts it when the buffer is full.
func (r *recorder) record(ev HistoryEvent) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.shut {
		return
	}
	select {
	case r.ch <- ev:
	default:
		r.met.dropped.Add(context.Background(), 1)
	}
}

func (r *recorder) run() {
	defer close(r.done)
	t := time.NewTicker(historyFlush)
	defer t.Stop()
	batch := make([]*stream.Message, 0, historyBatch)
	flush := func() {
		if len(batch) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := r.pub.Publish(ctx, r.topic, batch...); err != nil {
			r.log.Warn("offer: search history not published", "events", len(batch), "error", err)
			r.met.dropped.Add(ctx, int64(len(batch)))
		}
		batch = batch[:0]
	}
	for {
		select {
		case ev, ok := <-r.ch:
			if !ok {
				flush()
				return
			}
			body, _ := json.Marshal(ev)
			batch = append(batch, stream.NewMessage(ev.ResultID, "offer.search", body))
			if len(batch) >= historyBatch {
				flush()
			}
		case <-t.C:
			flush()
		}
	}
}

// close publishes what is queued and stops.
func (r *recorder) close() {
	r.mu.Lock()
	if !r.shut {
		r.shut = true
		close(r.ch)
	}
	r.mu.Unlock()
	<-r.done
}

// HistoryConfig configures the "offer-history" stage: one offer_requests
// row per call id.
func (s *Flow) HistoryConfig() sink.HistoryConfig[clickhouse.OfferRequestRow] {
	return sink.HistoryConfig[clickhouse.OfferRequestRow]{Stage: StageHistory, Topic: s.cfg.HistoryTopic(),
		Tables: []string{clickhouse.TableOfferRequests}, Rows: historyRows,
		Insert: clickhouse.InsertOfferRequests, Runner: s.cfg.Runner}
}

// historyRows decodes a history event into its row.
func historyRows(m *stream.Message) ([]clickhouse.OfferRequestRow, error) {
	var ev HistoryEvent
	if err := json.Unmarshal(m.Payload, &ev); err != nil || ev.CallID == "" {
		return nil, stream.Permanentf("decode history event: %v", err)
	}
	return []clickhouse.OfferRequestRow{{RequestID: ev.CallID, ClientID: ev.RequestID, ResultID: ev.ResultID,
		At: ev.At, Outcome: ev.Outcome, Status: ev.Status, Wait: time.Duration(ev.WaitMs) * time.Millisecond,
		Matches: uint32(max(ev.Matches, 0)), ResultAge: time.Duration(ev.ResultAgeMs) * time.Millisecond,
		Filter: ev.Filter, TraceID: ev.TraceID}}, nil
}
