package offer

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/dropstream/dropstream/stream"
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
	// Offset and Limit select the page of matches (Limit 1..1000, default 100).
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
	s.met.searches.Add(context.Background(), 1, metric.WithAttributes(keyOutcome.String(resp.Outcome)))
	s.met.duration.Record(context.Background(), took.Seconds(), metric.WithAttributes(keyOutcome.String(resp.Outcome), keyStatus.String(status)))
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
	stream.InjectTrace(ctx, s.tel.Propagator, carrier)
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

// wait reports whether the completion stream doneKey gets an entry within d.
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
