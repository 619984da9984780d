package notifier

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dropstream/dropstream/internal/tick"
	"github.com/dropstream/dropstream/notifier/digest"
)

// DigestService names the digest flusher among the binary's services.
const DigestService = "notifier-digests"

// maxDigestItems bounds a digest; the rest are later dropped as duplicates,
// so the bound is generous.
const maxDigestItems = 500

// DigestItem is one notification inside a digest's payload.
type DigestItem struct {
	Flow       string          `json:"flow"`
	Event      string          `json:"event"`
	Subject    string          `json:"subject"`
	Title      string          `json:"title,omitempty"`
	Text       string          `json:"text,omitempty"`
	Payload    json.RawMessage `json:"payload,omitempty"`
	ObservedAt time.Time       `json:"observed_at,omitzero"`
}

// DigestPayload is the payload of a digest request.
type DigestPayload struct {
	Window string       `json:"window"`
	Items  []DigestItem `json:"items"`
}

// FlushDigests publishes each due window as one critical digest request,
// then forgets its items, and returns how many. A window published twice
// is delivered once (keyed by subscriber, destination, window).
func (d *Deliverer) FlushDigests(ctx context.Context) (int, error) {
	now := d.cfg.Now()
	published := 0
	for p := 0; p < d.topic.Partitions; p++ {
		batches, err := d.digests.Due(ctx, d.topic.HashTag(p), now, 100)
		if err != nil {
			return published, err
		}
		for _, b := range batches {
			req, ok := digestRequest(b)
			if ok {
				if err := PublishRequests(ctx, d.pub, d.topic, req); err != nil {
					return published, fmt.Errorf("notifier: publish digest %s: %w", b.Window, err)
				}
				published++
			}
			if err := d.digests.Done(ctx, b); err != nil {
				return published, err
			}
		}
	}
	return published, nil
}

// digestRequest builds a batch's digest; false without a decodable item.
func digestRequest(b digest.Batch) (Request, bool) {
	sub, dest, _ := strings.Cut(b.Batch, "|")
	pl := DigestPayload{Window: b.Window}
	var first time.Time
	var titles []string
	for i, raw := range b.Items {
		if i == maxDigestItems {
			break
		}
		var r Request
		if json.Unmarshal(raw, &r) != nil {
			continue
		}
		pl.Items = append(pl.Items, DigestItem{Flow: r.Flow, Event: r.Event, Subject: r.Subject, Title: r.Title, Text: r.Text,
			Payload: r.Payload, ObservedAt: r.ObservedAt})
		if !r.ObservedAt.IsZero() && (first.IsZero() || r.ObservedAt.Before(first)) {
			first = r.ObservedAt
		}
		t := cmp.Or(r.Title, r.Subject)
		if len(titles) < 20 {
			titles = append(titles, "- "+t)
		}
	}
	if len(pl.Items) == 0 {
		return Request{}, false
	}
	body, err := json.Marshal(pl)
	if err != nil {
		return Request{}, false
	}
	text := strings.Join(titles, "\n")
	if len(text) > MaxTextLen {
		text = strings.ToValidUTF8(text[:MaxTextLen], "")
	}
	return Request{Flow: "digest", Event: "digest", Subject: "digest", SubscriberID: sub, DestinationID: dest, Window: b.Window,
		Critical: true, Digest: true, Title: strconv.Itoa(len(pl.Items)) + " notifications", Text: text, Payload: body, ObservedAt: first}, true
}

// RunDigests flushes due digests every DigestInterval until ctx ends.
func (d *Deliverer) RunDigests(ctx context.Context) error {
	tick.Every(ctx, d.cfg.DigestInterval, func() {
		if n, err := d.FlushDigests(ctx); err != nil && ctx.Err() == nil {
			d.logger.WarnContext(ctx, "notifier: digest flush failed", "error", err)
		} else if n > 0 {
			d.logger.InfoContext(ctx, "notifier: digests published", "count", n)
		}
	})
	return nil
}
