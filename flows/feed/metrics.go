package feed

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Metrics of polling etiquette, WebSub and duplicates, with bounded labels;
// per-feed figures live in the feed's record (Flow.Polling).
const (
	metricRequests   = "dropstream.feed.requests"
	metricBytes      = "dropstream.feed.response.bytes"
	metricSchedules  = "dropstream.feed.schedules"
	metricDuplicates = "dropstream.feed.duplicates.held"
	metricHalts      = "dropstream.feed.halts"
	metricWebSub     = "dropstream.feed.websub"
	metricMoved      = "dropstream.feed.moved"
)

func attrSet(k, v string) attribute.Set { return attribute.NewSet(attribute.String(k, v)) }

var (
	outcomeSets = map[string]attribute.Set{}
	reasonSets  = map[string]attribute.Set{}
)

func init() {
	for _, o := range []string{"ok", "not_modified", "error", "gone", "push"} {
		outcomeSets[o] = attrSet("outcome", o)
	}
	for _, r := range []string{ReasonInterval, ReasonAdaptive, ReasonFresh, ReasonTTL, ReasonSkip, ReasonPush, ReasonBackoff, ReasonRetryAfter} {
		reasonSets[r] = attrSet("reason", r)
	}
}

func outcomeAttrs(o string) attribute.Set { return outcomeSets[o] }
func reasonAttrs(r string) attribute.Set  { return reasonSets[r] }

// initMetrics creates the flow's instruments.
func (f *Flow) initMetrics(meter metric.Meter) error {
	var errs []error
	counter := func(name, desc, unit string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithDescription(desc), metric.WithUnit(unit))
		errs = append(errs, err)
		return c
	}
	f.guidWarnings = counter("dropstream.feed.guid_warnings", "Feed items with a missing guid (synthesized from link and title) or a duplicate guid (dropped).", "{item}")
	f.items = counter("dropstream.feed.items", "Feed item steps: new, edited, assigned.", "{item}")
	f.collections = counter("dropstream.feed.collections", "Collections completed and forwarded, and delivered.", "{collection}")
	f.requests = counter(metricRequests, "Feed fetches by outcome (ok, not_modified, error, gone) and contents pushed by WebSub hubs (push).", "{request}")
	f.bytes = counter(metricBytes, "Body bytes of feed answers and pushes (decompressed).", "By")
	f.schedules = counter(metricSchedules, "Next polls scheduled, by what chose the delay (interval, adaptive, fresh, ttl, skip, push, backoff, retry_after).", "{poll}")
	f.held = counter(metricDuplicates, "New feed items held back as duplicates: the canonical link and content of an item already seen under another guid.", "{item}")
	f.halts = counter(metricHalts, "Feeds no longer polled, by state: gone (410) or dead (consecutive failures).", "{feed}")
	f.websubEvents = counter(metricWebSub, "WebSub steps: subscribe (requested of a hub), verified, denied, pushed, rejected (bad signature or body).", "{event}")
	f.moved = counter(metricMoved, "Feeds whose URL was updated after a permanent redirect (301, 308).", "{feed}")
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// Every series of a bounded set starts at 0, so dashboards and alerts
	// see the rare ones (a halt, a push) as 0 before the first happens.
	ctx := context.Background()
	for _, o := range outcomeSets {
		f.requests.Add(ctx, 0, metric.WithAttributeSet(o))
	}
	for _, r := range reasonSets {
		f.schedules.Add(ctx, 0, metric.WithAttributeSet(r))
	}
	for _, st := range []string{FeedGone, FeedDead} {
		f.halts.Add(ctx, 0, metric.WithAttributeSet(attrSet("state", st)))
	}
	for _, e := range []string{"subscribe", "verified", "denied", "pushed", "rejected"} {
		f.websubEvents.Add(ctx, 0, metric.WithAttributeSet(attrSet("event", e)))
	}
	f.bytes.Add(ctx, 0)
	f.held.Add(ctx, 0)
	f.moved.Add(ctx, 0)
	return nil
}
