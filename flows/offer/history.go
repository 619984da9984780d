package offer

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer/sink"
)

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
	once  sync.Once
	mu    sync.RWMutex // guards closed against record
	shut  bool
}

func newRecorder(pub *stream.Publisher, topic stream.Topic, met *metrics, log *slog.Logger) *recorder {
	r := &recorder{pub: pub, topic: topic, met: met, log: log, ch: make(chan HistoryEvent, historyBuffer), done: make(chan struct{})}
	go r.run()
	return r
}

// record queues an event; when the buffer is full the event is dropped
// and counted.
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
	r.once.Do(func() {
		r.mu.Lock()
		r.shut = true
		close(r.ch)
		r.mu.Unlock()
		<-r.done
	})
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
