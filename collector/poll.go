package collector

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/oklog/ulid/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/collector/provider"
	"github.com/dropstream/dropstream/internal/bounds"
	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/internal/egress"
	"github.com/dropstream/dropstream/internal/ratelimit"
	"github.com/dropstream/dropstream/stream"
)

// Span attribute keys of a poll.
var (
	keySource     = attribute.Key("dropstream.source.id")
	keyProvider   = attribute.Key("dropstream.source.provider")
	keyScope      = attribute.Key("dropstream.scope.key")
	keyRunID      = attribute.Key("dropstream.run.id")
	keyOutcome    = attribute.Key("dropstream.poll.outcome")
	keyHTTPStatus = attribute.Key("http.response.status_code")
)

// pollResult is what the scheduler needs of a finished poll.
type pollResult struct {
	outcome    string
	retryAfter time.Duration
	failures   int // consecutive failures of the source after this run
}

// poll fetches scope i of src once, publishes the run, updates health and
// pauses the host after a 429. Only a publish failure is an error.
func (c *Collector) poll(ctx context.Context, src Source, gen uint64, i int) (pollResult, error) {
	scope := src.Scopes[i]
	scopeKey := scope.Key(src.ID)
	adapter, err := provider.For(src.Provider)
	if err != nil { // Validate guarantees a known provider
		return pollResult{}, err
	}
	started := c.cfg.Clock.Now()
	runID := NewRunID(started)
	ctx, span := c.tracer.Start(ctx, "poll "+src.Provider, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(keySource.String(src.ID), keyProvider.String(src.Provider),
			keyScope.String(scopeKey), keyRunID.String(runID)))
	defer span.End()

	wall := time.Now()
	res := c.fetch(ctx, src, adapter, scope)
	latency := time.Since(wall)
	finished := c.cfg.Clock.Now()
	if ctx.Err() != nil {
		// Shutting down: the provider did not fail, we left. No run.
		return pollResult{}, fmt.Errorf("poll of %s abandoned: %w", scopeKey, context.Cause(ctx))
	}
	// A finished fetch is recorded even if shutdown starts now.
	ctx = context.WithoutCancel(ctx)

	run := avail.RawRun{RunID: runID, SourceID: src.ID, Provider: src.Provider, Scope: scope, ScopeKey: scopeKey,
		StartedAt: started.UTC(), FinishedAt: finished.UTC(), Status: avail.StatusOK, HTTPStatus: res.status,
		Stabilization: src.Stabilization, NotifyFirstSight: src.NotifyFirstSight, RestaurantLevel: src.RestaurantLevel}
	if res.err != nil {
		run.Status, run.Error = avail.StatusFailed, clip.Marked(egress.Describe(res.err), maxRunError)
		span.SetStatus(codes.Error, run.Error)
	} else {
		run.Body = res.body
	}
	span.SetAttributes(keyOutcome.String(res.outcome))
	if res.status != 0 {
		span.SetAttributes(keyHTTPStatus.Int(res.status))
	}
	c.met.recordPoll(ctx, src, res.outcome, latency)
	if res.outcome == OutcomeThrottled { // pause the source's bucket until the Retry-After ends
		c.mu.Lock()
		if st, ok := c.sources[src.ID]; ok && st.bucket != nil {
			st.bucket.Pause(finished.Add(res.retryAfter))
		}
		c.mu.Unlock()
	}

	payload, err := json.Marshal(run)
	if err != nil {
		return pollResult{}, fmt.Errorf("encode run %s: %w", runID, err)
	}
	msg := stream.NewMessage(scopeKey, avail.TypeRawRun, payload)
	msg.SetContext(ctx)
	if err := c.pub.Publish(ctx, c.topics.Raw, msg); err != nil {
		span.RecordError(err)
		return pollResult{}, fmt.Errorf("publish run %s of %s: %w", runID, scopeKey, err)
	}
	if res.err != nil {
		c.log.WarnContext(ctx, "poll failed", "source", src.ID, "scope", scopeKey, "run_id", runID,
			"outcome", res.outcome, "http_status", res.status, "error", run.Error)
	}
	failures, err := c.recordHealth(ctx, src, gen, run, res.outcome == OutcomeAuthExpired)
	if err != nil {
		return pollResult{}, err
	}
	return pollResult{outcome: res.outcome, retryAfter: res.retryAfter, failures: failures}, nil
}

// maxRunError bounds the error text of a failed run.
const maxRunError = 1024

// recordHealth folds a run into its unchanged source's health, publishes
// any transition and returns the consecutive failures.
func (c *Collector) recordHealth(ctx context.Context, src Source, gen uint64, run avail.RawRun, authExpired bool) (int, error) {
	c.healthMu.Lock()
	defer c.healthMu.Unlock()
	c.mu.Lock()
	st, ok := c.sources[src.ID]
	if !ok || st.gen != gen {
		c.mu.Unlock()
		return 0, nil
	}
	var kind string
	var h SourceHealth
	blindSince := st.health.LastSuccess // before this run: a recovery's blind period starts there
	if c.cfg.Shared == nil {
		kind = st.health.record(run.Status == avail.StatusOK, run.RunID, run.FinishedAt, run.Error, authExpired, c.cfg.DownAfter)
		h = st.health
		c.mu.Unlock()
	} else {
		fp := st.fp
		c.mu.Unlock()
		var err error
		if kind, h, err = c.recordShared(ctx, src, fp, run, authExpired); err != nil {
			return 0, err
		}
		c.mu.Lock()
		if st, ok := c.sources[src.ID]; ok && st.gen == gen {
			st.health = h
		}
		c.mu.Unlock()
	}
	if kind == "" {
		return h.ConsecutiveFailures, nil
	}
	traceID := ""
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		traceID = sc.TraceID().String()
	}
	tr := sourceTransition(src, h, kind, run.RunID, run.FinishedAt, traceID)
	if kind == avail.KindOpen && !blindSince.IsZero() {
		tr.Entity.Attrs["blind_since"] = blindSince.UTC().Format(time.RFC3339Nano)
	}
	payload, err := json.Marshal(tr)
	if err != nil {
		return 0, fmt.Errorf("encode source transition: %w", err)
	}
	msg := stream.NewMessage(tr.ScopeKey, avail.TypeTransition, payload)
	msg.SetContext(ctx)
	if err := c.pub.Publish(ctx, c.topics.Transitions, msg); err != nil {
		// Undo the flip so that the next run tries the transition again.
		c.mu.Lock()
		if st, ok := c.sources[src.ID]; ok && st.gen == gen {
			st.health.Down = kind == avail.KindOpen
			st.health.Status = st.health.status()
		}
		c.mu.Unlock()
		if c.cfg.Shared != nil {
			err = errors.Join(err, unflipScript.Run(ctx, c.cfg.Shared, []string{healthKey(src.ID)}, run.RunID, kind == avail.KindOpen).Err())
		}
		return 0, fmt.Errorf("publish source transition of %s: %w", src.ID, err)
	}
	if kind == avail.KindClose {
		c.log.WarnContext(ctx, "source down", "source", src.ID, "consecutive_failures", h.ConsecutiveFailures, "error", h.LastError)
	} else {
		c.log.InfoContext(ctx, "source up", "source", src.ID, "run_id", run.RunID)
	}
	return h.ConsecutiveFailures, nil
}

// NewRunID returns a unique, time-ordered ULID: 48 bits of Unix
// milliseconds of at, then 80 random bits, in Crockford base32.
func NewRunID(at time.Time) string {
	return ulid.MustNew(min(uint64(max(at.UnixMilli(), 0)), ulid.MaxTime()), rand.Reader).String()
}

// Poll outcomes, the "outcome" attribute of the polls metric.
const (
	// OutcomeOK: the provider answered 2xx with a body within bounds that
	// its adapter reads.
	OutcomeOK = "ok"
	// OutcomeFailed: a network error, an unexpected HTTP status, a body
	// too large or one that does not parse.
	OutcomeFailed = "failed"
	// OutcomeTimeout: no complete answer within the timeout.
	OutcomeTimeout = "timeout"
	// OutcomeThrottled: HTTP 429.
	OutcomeThrottled = "throttled"
	// OutcomeAuthExpired: HTTP 401 or 403; the source is paused.
	OutcomeAuthExpired = "auth_expired"
)

// fetchResult is the outcome of one request.
type fetchResult struct {
	body    []byte
	status  int // HTTP status, 0 when no answer
	err     error
	outcome string
	// retryAfter is the pause a 429 asked for (or the default one).
	retryAfter time.Duration
}

// fetch sends one poll request for scope and reads the answer, within the
// configured timeout.
func (c *Collector) fetch(ctx context.Context, src Source, ad provider.Adapter, scope avail.Scope) fetchResult {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req, err := ad.NewRequest(ctx, src.BaseURL, scope)
	if err != nil {
		return fetchResult{err: fmt.Errorf("build request: %w", err), outcome: OutcomeFailed}
	}
	req.Header.Set("User-Agent", c.cfg.UserAgent)
	if src.AuthToken != "" {
		req.Header.Set("Authorization", "Bearer "+src.AuthToken)
	}
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return c.transportError(ctx, err, 0)
	}
	defer resp.Body.Close()
	res := fetchResult{status: resp.StatusCode}
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		body, err := io.ReadAll(io.LimitReader(resp.Body, avail.MaxRawBodySize+1))
		if err != nil {
			return c.transportError(ctx, fmt.Errorf("read body: %w", err), resp.StatusCode)
		}
		if len(body) > avail.MaxRawBodySize {
			res.err, res.outcome = fmt.Errorf("%w: response body exceeds %d bytes", egress.ErrTooLarge, avail.MaxRawBodySize), OutcomeFailed
			return res
		}
		// An answer that does not describe availability is a failed poll; only
		// the class is kept, as the parser's message may quote the answer.
		if _, err := ad.Parse(body, scope, src.RestaurantLevel); err != nil {
			res.err, res.outcome = fmt.Errorf("%w: the %s answer does not describe availability", egress.ErrMalformed, ad.Name()), OutcomeFailed
			return res
		}
		res.body, res.outcome = body, OutcomeOK
	case resp.StatusCode == http.StatusTooManyRequests:
		d, ok := ratelimit.ParseRetryAfter(resp.Header.Get("Retry-After"), c.cfg.Clock.Now(), c.cfg.MaxRetryAfter)
		if !ok {
			d = c.cfg.DefaultRetryAfter
		}
		res.retryAfter, res.outcome = d, OutcomeThrottled
		res.err = fmt.Errorf("throttled, retry after %s: %w", d, egress.Status(resp.StatusCode))
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		res.outcome = OutcomeAuthExpired
		res.err = fmt.Errorf("%w: %w", ErrAuthExpired, egress.Status(resp.StatusCode))
	default:
		// Only the status is kept: the provider's answer is never read
		// back to whoever reads the source's health or runs.
		res.outcome = OutcomeFailed
		res.err = egress.Status(resp.StatusCode)
	}
	return res
}

// transportError classifies a failed exchange: a timeout or another failure.
func (c *Collector) transportError(ctx context.Context, err error, status int) fetchResult {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return fetchResult{status: status, outcome: OutcomeTimeout, err: fmt.Errorf("timeout after %s: %w", c.cfg.Timeout, err)}
	}
	return fetchResult{status: status, outcome: OutcomeFailed, err: err}
}

// NormalizerStage is the name (and default consumer group) of the
// normalizer stage.
const NormalizerStage = "avail-normalizer"

// maxRawRunPayload bounds a raw run message: the body, base64-encoded in
// JSON, plus room for the other fields.
const maxRawRunPayload = avail.MaxRawBodySize/3*4 + 8 + 64<<10

// NewNormalizer returns the "avail-normalizer" stage: one avail.Snapshot
// per raw run to topics.Snapshots. Invalid runs are dead-lettered; a
// publish failure is retried.
func NewNormalizer(topics avail.Topics, pub *stream.Publisher) stream.Stage {
	return stream.Stage{
		Name:  NormalizerStage,
		Topic: topics.Raw,
		Handler: func(ctx context.Context, m *stream.Message) error {
			snap, err := normalizeMessage(m)
			if err != nil {
				return stream.Permanent(err)
			}
			payload, err := json.Marshal(snap)
			if err != nil {
				return stream.Permanentf("encode snapshot of run %s: %w", snap.RunID, err)
			}
			out := stream.NewMessage(snap.ScopeKey, avail.TypeSnapshot, payload)
			out.SetContext(ctx)
			return pub.Publish(ctx, topics.Snapshots, out)
		},
	}
}

// normalizeMessage decodes a raw-run message and normalizes it.
func normalizeMessage(m *stream.Message) (avail.Snapshot, error) {
	if m.Type != avail.TypeRawRun {
		return avail.Snapshot{}, fmt.Errorf("message type %q, want %q", clip.Marked(m.Type, maxQuoted), avail.TypeRawRun)
	}
	if len(m.Payload) > maxRawRunPayload {
		return avail.Snapshot{}, fmt.Errorf("raw run of %d bytes exceeds %d", len(m.Payload), maxRawRunPayload)
	}
	var run avail.RawRun
	dec := json.NewDecoder(bytes.NewReader(m.Payload))
	if err := dec.Decode(&run); err != nil {
		return avail.Snapshot{}, fmt.Errorf("decode raw run: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return avail.Snapshot{}, errors.New("decode raw run: data after the JSON object")
	}
	if run.ScopeKey != m.Key {
		return avail.Snapshot{}, fmt.Errorf("raw run %s: scope key %q differs from message key %q",
			clip.Marked(run.RunID, maxQuoted), clip.Marked(run.ScopeKey, maxQuoted), clip.Marked(m.Key, maxQuoted))
	}
	return Normalize(run)
}

// Normalize turns a raw run into its snapshot through the provider's
// adapter (ErrMalformed); a failed run gives OK false.
func Normalize(run avail.RawRun) (avail.Snapshot, error) {
	if err := validateRun(run); err != nil {
		return avail.Snapshot{}, err
	}
	snap := avail.Snapshot{RunID: run.RunID, SourceID: run.SourceID, Provider: run.Provider, ScopeKey: run.ScopeKey,
		RunAt: run.FinishedAt, StartedAt: run.StartedAt, Stabilization: run.Stabilization,
		NotifyFirstSight: run.NotifyFirstSight}
	if run.Status == avail.StatusFailed {
		snap.Error = cmp.Or(run.Error, "failed run without an error")
		return snap, nil
	}
	adapter, _ := provider.For(run.Provider) // checked by validateRun
	ents, err := adapter.Parse(run.Body, run.Scope, run.RestaurantLevel)
	if err != nil {
		return avail.Snapshot{}, fmt.Errorf("normalize run %s of source %s (scope %s, HTTP %d): %w",
			run.RunID, run.SourceID, run.ScopeKey, run.HTTPStatus, err)
	}
	snap.OK, snap.Entities = true, ents
	return snap, nil
}

// validateRun checks the fields of a raw run that later stages rely on.
func validateRun(run avail.RawRun) error {
	var errs []error
	if run.RunID == "" || len(run.RunID) > avail.MaxIDLen {
		errs = append(errs, fmt.Errorf("run id %q: want 1-%d bytes", clip.Marked(run.RunID, maxQuoted), avail.MaxIDLen))
	}
	if !validID(run.SourceID) {
		errs = append(errs, fmt.Errorf("source id %q: want 1-64 characters of [a-z0-9_-]", clip.Marked(run.SourceID, maxQuoted)))
	}
	if err := run.Scope.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("scope: %w", err))
	} else if run.ScopeKey != run.Scope.Key(run.SourceID) {
		errs = append(errs, fmt.Errorf("scope key %q is not the key of the run's source and scope", clip.Marked(run.ScopeKey, maxQuoted)))
	}
	if _, err := provider.For(run.Provider); err != nil {
		errs = append(errs, err)
	}
	if run.Status != avail.StatusOK && run.Status != avail.StatusFailed {
		errs = append(errs, fmt.Errorf("status %q: want %q or %q", clip.Marked(run.Status, maxQuoted), avail.StatusOK, avail.StatusFailed))
	}
	if len(run.Error) > 4096 {
		errs = append(errs, errors.New("error longer than 4096 bytes"))
	}
	errs = bounds.Check(errs, "stabilization", run.Stabilization, 0, MaxStabilization)
	if run.FinishedAt.IsZero() {
		errs = append(errs, errors.New("finished_at is missing"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid raw run: %w", errors.Join(errs...))
	}
	return nil
}
