package httpapi

import (
	"net/http"

	"github.com/gofiber/fiber/v2"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/flows/avail/watch"
	"github.com/dropstream/dropstream/internal/egress"
)

// WatcherRoutes manage who is told about availability.
type WatcherRoutes struct {
	Store *watch.Store
	// Egress refuses a webhook URL whose host is a denied address
	// (nil: the default policy).
	Egress *egress.Policy
}

// Register adds the routes to srv.
func (r WatcherRoutes) Register(srv *api.Server) {
	srv.Handle(api.Operation{Method: "POST", Path: "/v1/watchers", Tag: "watchers", Scope: api.ScopeWrite, Class: api.ClassCreate,
		Summary: "Watch a venue, a date range, party sizes or a slot; the webhook secret is shown only here",
		Body:    watch.Watcher{}, Response: watch.Watcher{}, Status: http.StatusCreated, Handler: r.create})
	srv.Handle(api.Operation{Method: "GET", Path: "/v1/watchers", Tag: "watchers", Scope: api.ScopeRead, Class: api.ClassRead,
		Summary: "List watchers", Query: []api.Param{{Name: "cursor"}, {Name: "limit", Type: "integer"}},
		Response: api.Page[watch.Watcher]{}, Handler: r.list})
	srv.Handle(api.Operation{Method: "GET", Path: "/v1/watchers/:id", Tag: "watchers", Scope: api.ScopeRead, Class: api.ClassRead,
		Summary: "One watcher", Response: watch.Watcher{}, Handler: r.get})
	srv.Handle(api.Operation{Method: "PATCH", Path: "/v1/watchers/:id", Tag: "watchers", Scope: api.ScopeWrite, Class: api.ClassChange,
		Summary: "Change some fields of a watcher (those given); the result is validated as on creation",
		Body:    watch.Patch{}, Response: watch.Watcher{}, Handler: r.patch})
	srv.Handle(api.Operation{Method: "POST", Path: "/v1/watchers/:id/pause", Tag: "watchers", Scope: api.ScopeWrite, Class: api.ClassChange,
		Summary: "Pause a watcher: it is told nothing until resumed", Response: watch.Watcher{}, Handler: r.pause(true)})
	srv.Handle(api.Operation{Method: "POST", Path: "/v1/watchers/:id/resume", Tag: "watchers", Scope: api.ScopeWrite, Class: api.ClassChange,
		Summary: "Resume a paused watcher", Response: watch.Watcher{}, Handler: r.pause(false)})
	srv.Handle(api.Operation{Method: "DELETE", Path: "/v1/watchers/:id", Tag: "watchers", Scope: api.ScopeWrite, Class: api.ClassChange,
		Summary: "Stop watching", Status: http.StatusNoContent, Handler: r.delete})
}

func (r WatcherRoutes) create(c *fiber.Ctx) error {
	w, err := api.Body[watch.Watcher](c)
	if err != nil {
		return err
	}
	if err := api.CheckText(api.Text("name", w.Name), api.Text("provider", w.Provider), api.Text("venue", w.Venue),
		api.Text("slot", w.Slot)); err != nil {
		return err
	}
	if w.WebhookURL, err = r.Egress.NormalizeURL(w.WebhookURL); err != nil {
		return api.UnprocessableEntity("invalid_watcher", "field webhook_url: "+err.Error())
	}
	w.Owner = api.Tenant(c)
	created, err := r.Store.Create(c.UserContext(), w)
	if err != nil {
		return api.MapError(err, invalidWatcher, api.When(watch.ErrQuotaExceeded, api.QuotaExceeded("")))
	}
	return c.Status(http.StatusCreated).JSON(created)
}

func (r WatcherRoutes) list(c *fiber.Ctx) error {
	return api.ListPage(c, watch.ErrInvalidWatcher, r.Store.ListIn)
}

func (r WatcherRoutes) get(c *fiber.Ctx) error {
	w, err := r.Store.GetIn(c.UserContext(), api.View(c), c.Params("id"))
	return api.Reply(c, w, err, watcherNotFound(c, watch.ErrNotFound), watcherNotFound(c, watch.ErrInvalidWatcher))
}

func (r WatcherRoutes) delete(c *fiber.Ctx) error {
	err := r.Store.DeleteIn(c.UserContext(), api.View(c), c.Params("id"))
	return api.NoContent(c, err, watcherNotFound(c, watch.ErrNotFound), watcherNotFound(c, watch.ErrInvalidWatcher))
}

func (r WatcherRoutes) patch(c *fiber.Ctx) error {
	p, err := api.Body[watch.Patch](c)
	if err != nil {
		return err
	}
	var texts []api.TextField
	for _, f := range []struct {
		name string
		v    *string
	}{{"name", p.Name}, {"provider", p.Provider}, {"venue", p.Venue}, {"slot", p.Slot}, {"time_zone", p.TimeZone}} {
		if f.v != nil {
			texts = append(texts, api.Text(f.name, *f.v))
		}
	}
	if err := api.CheckText(texts...); err != nil {
		return err
	}
	if p.WebhookURL != nil {
		u, err := r.Egress.NormalizeURL(*p.WebhookURL)
		if err != nil {
			return api.UnprocessableEntity("invalid_watcher", "field webhook_url: "+err.Error())
		}
		p.WebhookURL = &u
	}
	return r.update(c, p)
}

// pause is the handler of pause (true) or resume (false).
func (r WatcherRoutes) pause(paused bool) fiber.Handler {
	return func(c *fiber.Ctx) error { return r.update(c, watch.Patch{Paused: &paused}) }
}

func (r WatcherRoutes) update(c *fiber.Ctx, p watch.Patch) error {
	w, err := r.Store.UpdateIn(c.UserContext(), api.View(c), c.Params("id"), p)
	return api.Reply(c, w, err, watcherNotFound(c, watch.ErrNotFound), invalidWatcher)
}

// invalidWatcher answers ErrInvalidWatcher as 422.
var invalidWatcher = api.When(watch.ErrInvalidWatcher, api.UnprocessableEntity("invalid_watcher", ""))

// watcherNotFound answers target as the 404 of the watcher the route
// names.
func watcherNotFound(c *fiber.Ctx, target error) api.Case {
	return api.When(target, api.NotFound("watcher_not_found", "no watcher "+c.Params("id")))
}
