package httpapi

import (
	"net/url"
	"strconv"

	gojson "github.com/goccy/go-json"
	"github.com/gofiber/fiber/v2"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/writer"
)

// AvailabilityRoutes are the read routes over the availability projection.
type AvailabilityRoutes struct {
	Projection *writer.Projection
}

// entityTransition is one raw flip of an entity, derived from its sessions.
type entityTransition struct {
	Kind      string `json:"kind"`
	At        string `json:"at"`
	RunID     string `json:"run_id"`
	SessionID string `json:"session_id"`
}

// entityDetail is GET /v1/availability/{key}.
type entityDetail struct {
	Entity      writer.EntityState `json:"entity"`
	Transitions []entityTransition `json:"recent_transitions"`
}

// recentTransitions bounds the transitions shown with an entity.
const recentTransitions = 20

// Register adds the routes to srv.
func (a AvailabilityRoutes) Register(srv *api.Server) {
	limitParam := api.Param{Name: "limit", Type: "integer", Description: "page size, 1..1000 (default 100)"}
	srv.Handle(api.Operation{Method: "GET", Path: "/v1/availability", Tag: "availability", Scope: api.ScopeRead, Class: api.ClassRead,
		Summary: "List entities of the projection, filtered and paged",
		Query: []api.Param{{Name: "provider"}, {Name: "venue"}, {Name: "date", Description: "YYYY-MM-DD"},
			{Name: "party_size", Type: "integer"}, {Name: "state", Description: "open or closed"},
			{Name: "cursor", Description: "next_cursor of the previous page"}, limitParam},
		Response: api.Page[writer.EntityState]{}, Handler: listHandler(a.Projection.NewListCache(renderPage))})
	srv.Handle(api.Operation{Method: "GET", Path: "/v1/availability/:key", Tag: "availability", Scope: api.ScopeRead, Class: api.ClassRead,
		Summary:  "One entity's projection and its recent transitions (key URL-escaped)",
		Response: entityDetail{}, Handler: a.get})
	srv.Handle(api.Operation{Method: "GET", Path: "/v1/availability/:key/sessions", Tag: "availability", Scope: api.ScopeRead, Class: api.ClassRead,
		Summary: "One entity's availability sessions, newest first", Query: []api.Param{{Name: "cursor", Description: "next_cursor of the previous page"}, limitParam},
		Response: api.Page[writer.Session]{}, Handler: a.sessions})
}

// listHandler answers GET /v1/availability from pages.
func listHandler(pages *writer.ListCache) fiber.Handler {
	return func(c *fiber.Ctx) error {
		party, err := api.IntQuery(c, "party_size", 0, 0, 50)
		if err != nil {
			return err
		}
		limit, err := api.IntQuery(c, "limit", writer.DefaultListLimit, 1, writer.MaxListLimit)
		if err != nil {
			return err
		}
		date, err := api.DateQuery(c, "date")
		if err != nil {
			return err
		}
		f := writer.Filter{Provider: c.Query("provider"), Venue: c.Query("venue"), Date: date,
			PartySize: party, State: c.Query("state")}
		if err := f.Validate(); err != nil {
			return api.BadRequest("invalid_filter", err.Error())
		}
		b, err := pages.Page(c.UserContext(), f, c.Query("cursor"), limit)
		if err != nil {
			return api.MapError(err, api.When(writer.ErrBadCursor, api.BadRequest("invalid_cursor", "")))
		}
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
		return c.Send(b)
	}
}

// renderPage writes a page of entities as JSON.
func renderPage(items []writer.EntityState, next string) ([]byte, error) {
	if items == nil {
		items = []writer.EntityState{}
	}
	return gojson.Marshal(api.Page[writer.EntityState]{Items: items, NextCursor: next}) // encoding/json's bytes, faster
}

func (a AvailabilityRoutes) get(c *fiber.Ctx) error {
	key, err := entityKeyParam(c)
	if err != nil {
		return err
	}
	e, err := a.Projection.Get(c.UserContext(), key)
	if err != nil {
		return api.MapError(err, entityNotFound(key))
	}
	sessions, err := a.Projection.Sessions(c.UserContext(), key, recentTransitions/2)
	if err != nil {
		return err
	}
	out := entityDetail{Entity: e, Transitions: []entityTransition{}}
	for _, s := range sessions {
		if !s.ClosedAt.IsZero() {
			out.Transitions = append(out.Transitions, entityTransition{Kind: "close", At: s.ClosedAt.UTC().Format(timeFormat), RunID: s.CloseRun, SessionID: s.ID})
		}
		out.Transitions = append(out.Transitions, entityTransition{Kind: "open", At: s.OpenedAt.UTC().Format(timeFormat), RunID: s.OpenRun, SessionID: s.ID})
	}
	return c.JSON(out)
}

func (a AvailabilityRoutes) sessions(c *fiber.Ctx) error {
	key, err := entityKeyParam(c)
	if err != nil {
		return err
	}
	// An entity keeps a bounded number of sessions: read them whole and
	// page them by their opening, newest first.
	return api.ListAll(c, func(s writer.Session) string { return api.NewestFirst(s.OpenedAt, s.ID) }, func() ([]writer.Session, error) {
		if _, err := a.Projection.Get(c.UserContext(), key); err != nil {
			return nil, api.MapError(err, entityNotFound(key))
		}
		return a.Projection.Sessions(c.UserContext(), key, 0)
	})
}

// entityNotFound answers ErrNotFound for the entity of key.
func entityNotFound(key string) api.Case {
	return api.When(writer.ErrNotFound, api.NotFound("entity_not_found", "no entity with key "+strconv.Quote(key)))
}

const timeFormat = "2006-01-02T15:04:05.000Z07:00"

// maxKeyLen bounds entity keys taken from a path.
const maxKeyLen = 1024

// entityKeyParam returns the unescaped :key path parameter.
func entityKeyParam(c *fiber.Ctx) (string, error) {
	raw := c.Params("key")
	key, err := url.PathUnescape(raw)
	if err != nil || key == "" || len(key) > maxKeyLen {
		return "", api.BadRequest("invalid_key", "entity key must be a URL-escaped string of 1.."+strconv.Itoa(maxKeyLen)+" bytes")
	}
	return key, nil
}
