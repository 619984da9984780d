package httpapi

import (
	"errors"
	"net/http"

	"github.com/gofiber/fiber/v2"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/flows/offer"
)

// registerStanding adds the standing-search routes: a caller's filters
// whose result the flow keeps current, telling a notifier subscriber each
// time it changes.
func registerStanding(srv *api.Server, r routes) {
	srv.Handle(api.Operation{Method: "POST", Path: "/v1/standing-searches", Tag: "offers", Scope: api.ScopeWrite, Class: api.ClassCreate,
		Summary: "Create a standing search: its result is kept current as offers change, and the notifier subscriber is " +
			"told of each change once (per search and result version); 404 subscriber_not_found for a subscriber the caller does not see; 409 quota_exceeded at the caller's cap",
		Body: offer.StandingRequest{}, Response: offer.StandingSearch{}, Status: http.StatusCreated, Handler: r.createStanding})
	srv.Handle(api.Operation{Method: "GET", Path: "/v1/standing-searches", Tag: "offers", Scope: api.ScopeRead, Class: api.ClassRead,
		Summary: "The caller's standing searches, a page in id order",
		Query:   []api.Param{{Name: "cursor"}, {Name: "limit", Type: "integer"}}, Response: api.Page[offer.StandingSearch]{},
		Handler: r.listStanding})
	srv.Handle(api.Operation{Method: "GET", Path: "/v1/standing-searches/:id", Tag: "offers", Scope: api.ScopeRead, Class: api.ClassRead,
		Summary: "One of the caller's standing searches, with its result's version and size", Response: offer.StandingSearch{},
		Handler: r.getStanding})
	srv.Handle(api.Operation{Method: "DELETE", Path: "/v1/standing-searches/:id", Tag: "offers", Scope: api.ScopeWrite, Class: api.ClassChange,
		Summary: "Delete one of the caller's standing searches", Status: http.StatusNoContent, Handler: r.deleteStanding})
}

func (r routes) createStanding(c *fiber.Ctx) error {
	req, err := api.Body[offer.StandingRequest](c)
	if err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return api.UnprocessableEntity("invalid_standing_search", err.Error())
	}
	slot, err := api.Reserve(c, r.f.StandingQuota(), "standing searches")
	if err != nil {
		return err
	}
	ss, err := r.f.CreateStandingIn(c.UserContext(), api.View(c), req)
	if slotErr := api.Settle(c, slot, ss.ID, true, err); slotErr != nil {
		return errors.Join(err, slotErr)
	}
	if err != nil {
		// Another tenant's subscriber answers as one that does not exist.
		return api.MapError(err, invalidFilter("invalid_standing_search"),
			api.When(offer.ErrNotFound, api.NotFound("subscriber_not_found", "no subscriber "+req.SubscriberID)),
			api.When(offer.ErrTooManyStanding, api.Conflict("too_many_standing_searches", "")))
	}
	return c.Status(http.StatusCreated).JSON(ss)
}

func (r routes) listStanding(c *fiber.Ctx) error {
	return api.ListAll(c, func(s offer.StandingSearch) string { return s.ID },
		func() ([]offer.StandingSearch, error) { return r.f.ListStanding(c.UserContext(), api.View(c)) })
}

func (r routes) getStanding(c *fiber.Ctx) error {
	ss, err := r.f.GetStanding(c.UserContext(), api.View(c), c.Params("id"))
	return api.Reply(c, ss, err, standingNotFound(c))
}

func (r routes) deleteStanding(c *fiber.Ctx) error {
	if err := r.f.DeleteStanding(c.UserContext(), api.View(c), c.Params("id")); err != nil {
		return api.MapError(err, standingNotFound(c))
	}
	return api.Deleted(c, r.f.StandingQuota(), c.Params("id"))
}

// standingNotFound answers ErrNotFound for the route's standing search.
func standingNotFound(c *fiber.Ctx) api.Case {
	return api.When(offer.ErrNotFound, api.NotFound("standing_search_not_found", "no standing search "+c.Params("id")))
}
