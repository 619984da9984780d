package offer

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer/sink"
)

// Bounds of a search.
const (
	MaxPageSize        = 1000
	DefaultPageSize    = 100
	MaxRequestIDLength = 128
)

// ErrGone is returned for a repeated request id whose result no longer
// exists: the request is not computed a second time.
var ErrGone = errors.New("result of this request id is gone")

// SearchRequest is a complex filter request.
type SearchRequest struct {
	// RequestID is an optional idempotency key: a repeat starts nothing.
	RequestID string `json:"requestId,omitempty"`
	// Filter is the group of elements (filterType sellOffer).
	Filter Element `json:"filter"`
	// Offset and Limit select the page of matches. Limit default 100, at
	// most 1000.
	Offset int `json:"offset,omitempty"`
	Limit  int `json:"limit,omitempty"`
}

// Validate checks the request's bounds and its filter.
func (r SearchRequest) Validate() error {
	if len(r.RequestID) > MaxRequestIDLength || r.RequestID != "" && !validID(r.RequestID) {
		return fmt.Errorf("%w: requestId: want at most %d characters without control characters or '|'", ErrInvalidFilter, MaxRequestIDLength)
	}
	if r.Offset < 0 || r.Offset > MaxListOffset || r.Limit < 0 || r.Limit > MaxPageSize {
		return fmt.Errorf("%w: offset %d (0..%d) or limit %d (0..%d) out of range", ErrInvalidFilter, r.Offset, MaxListOffset, r.Limit, MaxPageSize)
	}
	return r.Filter.Validate()
}

// MaxListOffset bounds the offset of a page.
const MaxListOffset = 10_000_000

// Search outcomes: how the request was served.
const (
	OutcomeHit  = "hit"
	OutcomeJoin = "join"
	OutcomeMiss = "miss"
	OutcomeSeen = "seen"
	OutcomeGone = "gone"
)

// SearchResponse is a result plus how the request was served.
type SearchResponse struct {
	Result
	Outcome string `json:"outcome"`
}

// evalPayload is the fan-out message to a handler.
type evalPayload struct {
	ResultID        string          `json:"resultId"`
	UniqueRequestID string          `json:"uniqueRequestId"`
	Filter          json.RawMessage `json:"filter"`
}

// Search answers from the cache, joins a running computation or fans out,
// then waits up to MaxWait; status processing means fetch it later with
// Result. callID names the call in the history (random when empty).
func (s *Flow) Search(ctx context.Context, req SearchRequest, callID string) (SearchResponse, error) {
	start := time.Now()
	if err := req.Validate(); err != nil {
		return SearchResponse{}, err
	}
	req.Limit = cmp.Or(req.Limit, DefaultPageSize)
	if callID == "" {
		callID = randomID()
	}
	id, canonical := ResultID(req.Filter)
	ctx, span := s.tracer.Start(ctx, "offer search", trace.WithAttributes(attribute.String("offer.result_id", id)))
	defer span.End()
	resp, err := s.search(ctx, req, id, canonical)
	status := resp.Status
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		if !errors.Is(err, ErrGone) {
			return resp, err
		}
		resp.Outcome, status = OutcomeGone, "gone"
	}
	took := time.Since(start)
	s.met.search(resp.Outcome, status, took.Seconds())
	span.SetAttributes(attribute.String("offer.outcome", resp.Outcome), attribute.String("offer.status", status))
	ev := HistoryEvent{CallID: callID, RequestID: req.RequestID, ResultID: id, At: s.cfg.Now().UTC(), Outcome: resp.Outcome,
		Status: status, WaitMs: took.Milliseconds(), Matches: resp.Total, Filter: string(canonical)}
	if resp.CompletedAt != nil && resp.Outcome == OutcomeHit {
		age := s.cfg.Now().Sub(*resp.CompletedAt)
		ev.ResultAgeMs = max(0, age.Milliseconds())
		s.met.age.Record(context.Background(), max(0, age.Seconds()))
	}
	if sc := span.SpanContext(); sc.HasTraceID() {
		ev.TraceID = sc.TraceID().String()
	}
	s.history.record(ev)
	return resp, err
}

func (s *Flow) search(ctx context.Context, req SearchRequest, id string, canonical []byte) (SearchResponse, error) {
	keys := s.cfg.resultKeys(id)
	uid := randomID()
	payload, _ := json.Marshal(evalPayload{ResultID: id, UniqueRequestID: uid, Filter: canonical})
	carrier := stream.NewMessage(id, "", nil)
	stream.InjectTrace(ctx, s.prop, carrier)
	bypass, epoch, err := s.guard(ctx)
	if err != nil {
		return SearchResponse{}, err
	}
	allKeys := append(keys.all(), s.cfg.requestKey(id, req.RequestID), keys.live)
	// Judge the reply with the script's now: a hit must not come back expired.
	now := s.cfg.Now()
	args := []any{now.UnixMilli(), s.cfg.ProcessingTimeout.Milliseconds(), req.RequestID, uid, canonical, payload,
		carrier.TraceParent, (s.cfg.ProcessingTimeout + s.cfg.ResultTTL + s.cfg.ResultGrace).Milliseconds(),
		req.Offset, req.Limit, (s.cfg.ProcessingTimeout + s.cfg.ResultTTL + s.cfg.ResultGrace).Milliseconds(), id, bypass, epoch}
	for _, h := range s.cfg.Handlers {
		allKeys = append(allKeys, s.cfg.EvalTopic(h.Tag).Stream(keys.partition))
		args = append(args, h.Tag)
	}
	raw, err := beginScript.Run(ctx, s.rdb, allKeys, args...).Result()
	if err != nil {
		return SearchResponse{}, fmt.Errorf("offer: search %s: %w", id, err)
	}
	outcome, res, err := parseReply(id, now, raw, req.Offset)
	if err != nil {
		return SearchResponse{}, err
	}
	resp := SearchResponse{Result: res, Outcome: outcome}
	switch {
	case outcome == OutcomeGone:
		return SearchResponse{Result: Result{ResultID: id, Matches: []Match{}}, Outcome: outcome}, ErrGone
	case res.Status == StatusComplete || res.Status == StatusExpired:
		return resp, nil
	}
	done, err := s.wait(ctx, keys.done, s.cfg.MaxWait)
	if err != nil || !done {
		return resp, err
	}
	r, err := s.Result(ctx, id, req.Offset, req.Limit)
	if errors.Is(err, ErrNotFound) {
		return resp, nil
	}
	resp.Result = r
	return resp, err
}

// wait blocks until the result's completion stream has an entry or d has
// passed, and reports which.
func (s *Flow) wait(ctx context.Context, doneKey string, d time.Duration) (bool, error) {
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left < time.Millisecond {
			return false, nil
		}
		xs, err := s.rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{doneKey, "0-0"}, Count: 1, Block: left}).Result()
		switch {
		case errors.Is(err, redis.Nil):
			return false, nil
		case err != nil:
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			return false, fmt.Errorf("offer: wait for %s: %w", doneKey, err)
		case len(xs) > 0 && len(xs[0].Messages) > 0:
			return true, nil
		}
	}
}

// Result returns a result's status and, while kept, its matches from
// offset; ErrNotFound when it does not exist.
func (s *Flow) Result(ctx context.Context, id string, offset, limit int) (Result, error) {
	if !validResultID(id) {
		return Result{}, ErrNotFound
	}
	if offset < 0 || offset > MaxListOffset || limit < 1 || limit > MaxPageSize {
		return Result{}, fmt.Errorf("%w: offset %d or limit %d out of range", ErrInvalidFilter, offset, limit)
	}
	keys := s.cfg.resultKeys(id)
	raw, err := pageScript.Run(ctx, s.rdb, []string{keys.main, keys.data, keys.values}, offset, limit).Result()
	if err != nil {
		return Result{}, fmt.Errorf("offer: result %s: %w", id, err)
	}
	outcome, r, err := parseReply(id, s.cfg.Now(), raw, offset)
	if err != nil {
		return Result{}, err
	}
	if outcome == "none" {
		return Result{}, ErrNotFound
	}
	if r.Status == StatusProcessing {
		r.Matches, r.Total, r.NextOffset = []Match{}, 0, 0
	}
	return r, nil
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
