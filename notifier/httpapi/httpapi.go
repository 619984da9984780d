// Package httpapi serves the notifier's routes: subscribers with their
// public links, recent notifications and why each was sent, statistics.
package httpapi

import (
	"cmp"
	"context"
	"math"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/history"
)

// Register adds SubscriberRoutes, NotificationRoutes and StatsRoutes over
// f to srv; stats answer 503 not_configured without ClickHouse.
func Register(srv *api.Server, f *notifier.Flow) {
	channels := f.Channels()
	SubscriberRoutes{Store: f.Subscribers(), Notify: f.Notify, PublicURL: f.PublicURL(), Egress: f.Egress(),
		HasChannel: func(ch string) bool { _, ok := channels[ch]; return ok }, Quota: f.SubscriberQuota()}.Register(srv)
	nr := NotificationRoutes{History: f.History(), Owner: f.OwnerOf}
	if f.ClickHouse() != nil {
		nr.Cause = f.Cause
	}
	nr.Register(srv)
	StatsRoutes{ClickHouse: f.ClickHouse()}.Register(srv)
}

// StatsRoutes serve GET /v1/stats/notifications from ClickHouse's hourly
// rollup of the history.
type StatsRoutes api.StatsSource

// notificationRow is one group: distinct notifications, the count with a
// record of each status, and the latency of sent ones.
type notificationRow struct {
	Key           api.StatsKey `json:"key"`
	Notifications uint64       `json:"notifications"`
	Sent          uint64       `json:"sent"`
	Failed        uint64       `json:"failed"`
	Rejected      uint64       `json:"rejected"`
	Held          uint64       `json:"held"`
	Batched       uint64       `json:"batched"`
	Suppressed    uint64       `json:"suppressed"`
	LatencyP50Ms  int64        `json:"latency_p50_ms"`
	LatencyP90Ms  int64        `json:"latency_p90_ms"`
	LatencyP99Ms  int64        `json:"latency_p99_ms"`
}

// notificationStats is GET /v1/stats/notifications.
type notificationStats struct {
	api.StatsHead
	Items []notificationRow `json:"items"`
}

// Register adds the route to srv.
func (r StatsRoutes) Register(srv *api.Server) {
	srv.Handle(api.Operation{Method: "GET", Path: "/v1/stats/notifications", Tag: "stats", Scope: api.ScopeRead, Class: api.ClassRead,
		Summary: "Notifications by status and their latency per group from the hourly rollup of the notifier's history",
		Query: append([]api.Param{{Name: "group_by", Description: "hour, day, flow, channel or event (default hour)"},
			{Name: "channel"}}, api.StatsParams()...),
		Response: notificationStats{}, Handler: api.StatsHandler(api.StatsSource(r), clickhouse.NotificationGroups, r.notifications)})
}

func (r StatsRoutes) notifications(ctx context.Context, q clickhouse.StatsQuery, head api.StatsHead) (any, error) {
	rows, err := clickhouse.NotificationStats(ctx, r.ClickHouse, q)
	if err != nil {
		return nil, err
	}
	out := notificationStats{StatsHead: head, Items: make([]notificationRow, 0, len(rows))}
	for _, s := range rows {
		out.Items = append(out.Items, notificationRow{Key: api.StatsKeyOf(s.Key), Notifications: s.Notifications, Sent: s.Sent,
			Failed: s.Failed, Rejected: s.Rejected, Held: s.Held, Batched: s.Batched, Suppressed: s.Suppressed,
			LatencyP50Ms: s.LatencyP50.Milliseconds(), LatencyP90Ms: s.LatencyP90.Milliseconds(), LatencyP99Ms: s.LatencyP99.Milliseconds()})
	}
	return out, nil
}

// NotificationRoutes serve the notifier's history and provenance.
type NotificationRoutes struct {
	History *history.Recorder
	// Cause finds a notification's transition and run; nil without ClickHouse.
	Cause func(ctx context.Context, eventID, runID string) (clickhouse.Cause, error)
	// Owner returns a subscriber's tenant, who owns its notifications.
	// Nil: every notification is tenancy.Open's.
	Owner func(ctx context.Context, subscriberID string) (string, error)
}

// sees reports whether the caller sees the notifications of subscriberID.
func (r NotificationRoutes) sees(c *fiber.Ctx, subscriberID string) (bool, error) {
	v := api.View(c)
	if v.All {
		return true, nil
	}
	if r.Owner == nil {
		return v.Sees(""), nil
	}
	owner, err := r.Owner(c.UserContext(), subscriberID)
	return err == nil && v.Sees(owner), err
}

// whyChain is GET /v1/notifications/{id}/why: notification → transition →
// run → trace id.
type whyChain struct {
	Notification history.Record `json:"notification"`
	Transition   *whyTransition `json:"transition,omitempty"`
	Run          *whyRun        `json:"run,omitempty"`
	// TraceID is the trace to open: the run's, else the notification's.
	TraceID string `json:"trace_id,omitempty"`
	// Complete is false when a link is not known (yet).
	Complete bool `json:"complete"`
}

type whyTransition struct {
	EventID   string    `json:"event_id"`
	RunID     string    `json:"run_id"`
	Kind      string    `json:"kind,omitempty"`
	Stable    bool      `json:"stable"`
	EntityKey string    `json:"entity_key,omitempty"`
	RunAt     time.Time `json:"run_at,omitzero"`
	TraceID   string    `json:"trace_id,omitempty"`
}

type whyRun struct {
	RunID    string    `json:"run_id"`
	SourceID string    `json:"source_id,omitempty"`
	Status   string    `json:"status,omitempty"`
	RunAt    time.Time `json:"run_at,omitzero"`
	TraceID  string    `json:"trace_id,omitempty"`
}

// Register adds the routes to srv.
func (r NotificationRoutes) Register(srv *api.Server) {
	srv.Handle(api.Operation{Method: "GET", Path: "/v1/notifications", Tag: "notifications", Scope: api.ScopeRead, Class: api.ClassRead,
		Summary:  "Recent notifications of a subscriber (or watcher), newest first. Each was decided once per (subscriber, subject, window); a receiver gets it at least once, every time with the same id (the webhook-id header), on which it deduplicates",
		Query:    []api.Param{{Name: "subscriber", Required: true}, {Name: "cursor"}, {Name: "limit", Type: "integer"}},
		Response: api.Page[history.Record]{}, Handler: r.list})
	srv.Handle(api.Operation{Method: "GET", Path: "/v1/notifications/:id/why", Tag: "notifications", Scope: api.ScopeRead, Class: api.ClassRead,
		Summary:  "Why a notification was sent: notification → transition → run → trace id",
		Response: whyChain{}, Handler: r.why})
}

func (r NotificationRoutes) list(c *fiber.Ctx) error {
	sub := c.Query("subscriber")
	if sub == "" || len(sub) > 64 {
		return api.BadRequest("invalid_subscriber", "subscriber: want a subscriber or watcher id")
	}
	// Read the bounded list whole and page by time, so cursors hold.
	return api.ListAll(c, func(rec history.Record) string {
		return api.NewestFirst(rec.At, rec.ID+"/"+rec.Status+"/"+strconv.Itoa(rec.Attempts))
	}, func() ([]history.Record, error) {
		if ok, err := r.sees(c, sub); err != nil {
			return nil, err
		} else if !ok {
			return nil, api.NotFound("subscriber_not_found", "no subscriber or watcher "+sub)
		}
		return r.History.Recent(c.UserContext(), sub, math.MaxInt32)
	})
}

func (r NotificationRoutes) why(c *fiber.Ctx) error {
	ctx := c.UserContext()
	rec, err := r.History.Get(ctx, c.Params("id"))
	if err == nil {
		// Another tenant's notification answers as one that does not exist.
		if ok, seeErr := r.sees(c, rec.SubscriberID); seeErr != nil || !ok {
			err = cmp.Or(seeErr, history.ErrNotFound)
		}
	}
	if err != nil {
		return api.MapError(err, api.When(history.ErrNotFound, api.NotFound("notification_not_found", "no recent notification "+c.Params("id"))))
	}
	out := whyChain{Notification: rec, TraceID: rec.TraceID}
	if rec.EventID != "" {
		out.Transition = &whyTransition{EventID: rec.EventID, RunID: rec.RunID}
	}
	if rec.RunID != "" {
		out.Run = &whyRun{RunID: rec.RunID}
	}
	if r.Cause != nil && (rec.EventID != "" || rec.RunID != "") {
		cause, err := r.Cause(ctx, rec.EventID, rec.RunID)
		if err != nil {
			return err
		}
		if t := cause.Transition; t != nil {
			out.Transition = &whyTransition{EventID: t.EventID, RunID: t.RunID, Kind: t.Kind, Stable: t.Stable,
				EntityKey: t.EntityKey, RunAt: t.RunAt, TraceID: t.TraceID}
		}
		if run := cause.Run; run != nil {
			out.Run = &whyRun{RunID: run.RunID, SourceID: run.SourceID, Status: run.Status, RunAt: run.RunAt, TraceID: run.TraceID}
			if run.TraceID != "" {
				out.TraceID = run.TraceID
			}
		}
		out.Complete = cause.Transition != nil && cause.Run != nil
	}
	return c.JSON(out)
}
