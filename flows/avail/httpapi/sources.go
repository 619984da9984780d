package httpapi

import (
	"errors"
	"net/http"

	"github.com/gofiber/fiber/v2"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/collector"
	"github.com/dropstream/dropstream/internal/egress"
	"github.com/dropstream/dropstream/internal/quota"
)

// SourceRoutes manage the collector's sources.
type SourceRoutes struct {
	Store *collector.Store
	// Collector, when set, applies a change at once; otherwise running
	// collectors pick it up at their next sync.
	Collector *collector.Collector
	// Egress refuses a base URL whose host is a denied address (nil: the
	// default policy).
	Egress *egress.Policy
	// Quota caps the sources each caller creates (nil: no cap); a
	// replace does not count again.
	Quota *quota.Quota
}

// sourceDetail is a source with its health, when this process polls it.
type sourceDetail struct {
	Source collector.Source        `json:"source"`
	Health *collector.SourceHealth `json:"health,omitempty"`
}

// Register adds the routes to srv.
func (r SourceRoutes) Register(srv *api.Server) {
	srv.Handle(api.Operation{Method: "POST", Path: "/v1/sources", Tag: "sources", Scope: api.ScopeWrite, Class: api.ClassCreate,
		Summary: "Create or replace a source (provider, base URL, scopes, interval)",
		Body:    collector.Source{}, Response: collector.Source{}, Status: http.StatusCreated, Handler: r.put})
	srv.Handle(api.Operation{Method: "GET", Path: "/v1/sources", Tag: "sources", Scope: api.ScopeRead, Class: api.ClassRead,
		Summary: "List sources (auth tokens redacted), by id", Query: []api.Param{{Name: "cursor"}, {Name: "limit", Type: "integer"}},
		Response: api.Page[collector.Source]{}, Handler: r.list})
	srv.Handle(api.Operation{Method: "GET", Path: "/v1/sources/:id", Tag: "sources", Scope: api.ScopeRead, Class: api.ClassRead,
		Summary: "One source and its health", Response: sourceDetail{}, Handler: r.get})
	srv.Handle(api.Operation{Method: "DELETE", Path: "/v1/sources/:id", Tag: "sources", Scope: api.ScopeWrite, Class: api.ClassChange,
		Summary: "Delete a source; its history stays", Status: http.StatusNoContent, Handler: r.delete})
}

// sourceNotFound answers ErrSourceNotFound.
var sourceNotFound = api.When(collector.ErrSourceNotFound, api.NotFound("source_not_found", ""))

func (r SourceRoutes) put(c *fiber.Ctx) error {
	src, err := api.Body[collector.Source](c)
	if err != nil {
		return err
	}
	texts := []api.TextField{api.Text("id", src.ID), api.Text("provider", src.Provider)}
	for _, sc := range src.Scopes {
		texts = append(texts, api.Text("scopes.venue", sc.Venue), api.Text("scopes.query", sc.Query))
	}
	if err := api.CheckText(texts...); err != nil {
		return err
	}
	if err := src.Validate(); err != nil {
		return api.UnprocessableEntity("invalid_source", err.Error())
	}
	if src.BaseURL, err = r.Egress.NormalizeURL(src.BaseURL); err != nil {
		return api.UnprocessableEntity("invalid_source", "field base_url: "+err.Error())
	}
	src.Tenant = api.Tenant(c)
	slot, err := api.ReserveFor(c, r.Quota, "sources", src.ID)
	if err != nil {
		return err
	}
	err = api.MapError(r.Store.Put(c.UserContext(), src),
		api.When(collector.ErrSourceTaken, api.Conflict("source_id_taken", "another source holds id "+src.ID+"; choose another id")))
	if err := errors.Join(err, api.Settle(c, slot, src.ID, true, err)); err != nil {
		return err
	}
	if r.Collector != nil {
		if err := r.Collector.Upsert(src); err != nil {
			return err
		}
	}
	return c.Status(http.StatusCreated).JSON(src.Redacted())
}

func (r SourceRoutes) list(c *fiber.Ctx) error {
	cursor, limit, err := api.PageQuery(c)
	if err != nil {
		return err
	}
	srcs, next, err := r.Store.PageIn(c.UserContext(), api.View(c), cursor, limit)
	if err != nil {
		return err
	}
	out := api.Page[collector.Source]{Items: make([]collector.Source, 0, len(srcs)), NextCursor: next}
	for _, s := range srcs {
		out.Items = append(out.Items, s.Redacted())
	}
	return c.JSON(out)
}

func (r SourceRoutes) get(c *fiber.Ctx) error {
	src, h, polled, err := r.Store.GetWithHealth(c.UserContext(), api.View(c), c.Params("id"))
	if err != nil {
		return api.MapError(err, sourceNotFound)
	}
	out := sourceDetail{Source: src.Redacted()}
	// The health every collector copy shares, once one has polled the
	// source; else what this process's collector knows.
	if polled {
		out.Health = &h
	} else if r.Collector != nil {
		if h, err := r.Collector.Health(src.ID); err == nil {
			out.Health = &h
		}
	}
	return c.JSON(out)
}

func (r SourceRoutes) delete(c *fiber.Ctx) error {
	id := c.Params("id")
	if err := r.Store.DeleteIn(c.UserContext(), api.View(c), id); err != nil {
		return api.MapError(err, sourceNotFound)
	}
	if err := r.Quota.Release(c.UserContext(), id); err != nil {
		return err
	}
	if r.Collector != nil {
		if err := r.Collector.Remove(id); err != nil && !errors.Is(err, collector.ErrSourceNotFound) {
			return err
		}
	}
	return c.SendStatus(http.StatusNoContent)
}
