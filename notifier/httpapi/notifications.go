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
	"github.com/dropstream/dropstream/notifier/history"
)

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
