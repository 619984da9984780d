package collector

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/collector/provider"
	"github.com/dropstream/dropstream/internal/egress"
	"github.com/dropstream/dropstream/internal/ratelimit"
)

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
