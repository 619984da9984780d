// Package httpapi serves the feed flow's API: feeds, their items,

// subscribables, their collections and subscriptions.
package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/flows/feed"
)

// FeedView is a feed with its latest poll, state (active, gone, dead),
// polling figures and WebSub subscription.
type FeedView struct {
	feed.Feed
	LastPoll *feed.PollStatus `json:"last_poll,omitempty"`
	Polling  feed.FeedPolling `json:"polling"`
}

type (
	feedPage         = api.Page[FeedView]
	itemPage         = api.Page[feed.ItemView]
	subscribablePage = api.Page[feed.Subscribable]
	collectionPage   = api.Page[feed.CollectionView]
	subscriptionPage = api.Page[feed.Subscription]
)

// maxItemOffset bounds the position a page of items starts at.
const maxItemOffset = 1_000_000

// pageParams are the query parameters of every list route.
var pageParams = []api.Param{{Name: "cursor", Description: "next_cursor of the previous page"},
	{Name: "limit", Type: "integer", Description: "page size, 1..1000 (default 100)"}}

// routes are the handlers of the feed API over one flow.
type routes struct {
	f     *feed.Flow
	store *feed.Store
}

// Register adds the feed API to srv. Opt-in and unsubscribe links are the
// notifier's (api.SubscriberRoutes).
func Register(srv *api.Server, fl *feed.Flow) {
	f := routes{f: fl, store: fl.Store()}
	handle(srv, api.Operation{Method: "POST", Path: "/v1/feeds", Class: api.ClassCreate, Status: http.StatusCreated, OtherStatuses: []int{http.StatusOK},
		Summary: "Add a feed (its id derives from its URL; adding it again returns it with 200)", Body: feed.Feed{}, Response: feed.Feed{}, Handler: f.postFeed})
	handle(srv, api.Operation{Method: "GET", Path: "/v1/feeds", Class: api.ClassRead,
		Summary: "List feeds with their latest poll, by id", Query: pageParams, Response: feedPage{}, Handler: f.listFeeds})
	handle(srv, api.Operation{Method: "GET", Path: "/v1/feeds/:id", Class: api.ClassRead,
		Summary: "One feed with its latest poll", Response: FeedView{}, Handler: f.held(f.getFeed)})
	handle(srv, api.Operation{Method: "DELETE", Path: "/v1/feeds/:id", Class: api.ClassChange, Status: http.StatusNoContent,
		Summary: "Remove a feed and its items (409 while it has subscribables)", Handler: f.held(f.deleteFeed)})
	handle(srv, api.Operation{Method: "GET", Path: "/v1/feeds/:id/items", Class: api.ClassRead, Query: pageParams,
		Summary: "A feed's items by first seen, with state and timestamps", Response: itemPage{}, Handler: f.held(f.listItems)})
	handle(srv, api.Operation{Method: "POST", Path: "/v1/feeds/:id/items/:iid/exclude", Class: api.ClassChange,
		Summary: "Exclude an unassigned item: it is never sent", Response: excludedItem{}, Handler: f.held(f.excludeItem)})
	handle(srv, api.Operation{Method: "POST", Path: "/v1/feeds/:id/subscribables", Class: api.ClassCreate, Status: http.StatusCreated, OtherStatuses: []int{http.StatusOK},
		Summary: "Define a subscription (each item, daily, weekly, every n)", Body: feed.Subscribable{}, Response: feed.Subscribable{}, Handler: f.held(f.postSubscribable)})
	handle(srv, api.Operation{Method: "GET", Path: "/v1/feeds/:id/subscribables", Class: api.ClassRead,
		Summary: "A feed's subscribables, by name", Query: pageParams, Response: subscribablePage{}, Handler: f.held(f.listSubscribables)})
	handle(srv, api.Operation{Method: "GET", Path: "/v1/feeds/:id/subscribables/:name", Class: api.ClassRead,
		Summary: "One subscribable", Response: feed.Subscribable{}, Handler: f.held(f.getSubscribable)})
	handle(srv, api.Operation{Method: "GET", Path: "/v1/feeds/:id/subscribables/:name/collections", Class: api.ClassRead,
		Summary: "A subscribable's collections: the open ones (opened, due) and the completed ones waiting for their delivery (delivered ones are deleted)",
		Query:   pageParams, Response: collectionPage{}, Handler: f.held(f.listCollections)})
	handle(srv, api.Operation{Method: "DELETE", Path: "/v1/feeds/:id/subscribables/:name", Class: api.ClassChange, Status: http.StatusNoContent,
		Summary: "Remove a subscribable and its subscriptions", Handler: f.held(f.deleteSubscribable)})
	handle(srv, api.Operation{Method: "POST", Path: "/v1/feeds/:id/subscribables/:name/subscriptions", Class: api.ClassCreate,
		Status: http.StatusCreated, OtherStatuses: []int{http.StatusOK}, Body: subscribeBody{}, Response: feed.Subscription{},
		Summary: "Subscribe a destination: e-mail and webhook destinations are notifier subscribers, unconfirmed until the notifier's opt-in link sent to them is followed (an address already confirmed there is confirmed at once); a webhook secret is shown only when its notifier destination is created", Handler: f.held(f.postSubscription)})
	handle(srv, api.Operation{Method: "GET", Path: "/v1/feeds/:id/subscribables/:name/subscriptions", Class: api.ClassRead,
		Summary: "A subscribable's subscriptions, confirmed as the notifier says (unsubscribed ones are left out), by id", Query: pageParams, Response: subscriptionPage{}, Handler: f.held(f.listSubscriptions)})
	handle(srv, api.Operation{Method: "DELETE", Path: "/v1/feed-subscriptions/:sid", Class: api.ClassChange, Status: http.StatusNoContent,
		Summary: "Remove a subscription", Handler: f.heldSubscription(f.deleteSubscription)})
	handle(srv, api.Operation{Method: "POST", Path: "/v1/feeds/:id/resume", Class: api.ClassChange, Response: FeedView{}, Handler: f.held(f.resumeFeed),
		Summary: "Poll a gone or dead feed again (its halt and its run of failures forgotten); a polled feed is left as it is"})
	f.registerWebSub(srv)
}

// handle registers op under the tag "feeds": a read (api.ClassRead) needs
// the read scope, any other class the write scope.
func handle(srv *api.Server, op api.Operation) {
	op.Tag, op.Scope = "feeds", api.ScopeWrite
	if op.Class == api.ClassRead {
		op.Scope = api.ScopeRead
	}
	srv.Handle(op)
}

func (f routes) resumeFeed(c *fiber.Ctx) error {
	if err := f.f.Resume(c.UserContext(), c.Params("id")); err != nil {
		return apiError(err, "feed")
	}
	return f.getFeed(c)
}

// apiError maps the package's errors about what (a feed, an item...) to
// API errors.
func apiError(err error, what string) error {
	return api.MapError(err, api.When(feed.ErrInvalid, api.UnprocessableEntity("invalid_"+what, "")),
		api.When(feed.ErrNotFound, api.NotFound(what+"_not_found", "no such "+what)),
		api.When(feed.ErrConflict, api.Conflict(what+"_conflict", "")))
}

func (f routes) postFeed(c *fiber.Ctx) error {
	in, err := api.Body[feed.Feed](c)
	if err != nil {
		return err
	}
	if err := api.CheckText(api.Text("id", in.ID), api.Text("url", in.URL)); err != nil {
		return err
	}
	if in.URL, err = f.f.Egress().NormalizeURL(in.URL); err != nil {
		return api.UnprocessableEntity("invalid_feed", "field url: "+err.Error())
	}
	slot, err := api.ReserveFor(c, f.f.FeedQuota(), "feeds", feed.FeedID(feed.NormalizeURL(in.URL)))
	if err != nil {
		return err
	}
	out, created, err := f.store.PutFeed(c.UserContext(), in)
	if err := api.Settle(c, slot, out.ID, created, err); err != nil {
		return err
	}
	if err != nil {
		return apiError(err, "feed")
	}
	if err := f.store.AddTenant(c.UserContext(), out.ID, api.Tenant(c)); err != nil {
		return err
	}
	return api.Created(c, created, out)
}

func (f routes) view(c *fiber.Ctx, fd feed.Feed) (FeedView, error) {
	v := FeedView{Feed: fd}
	if st, ok := f.store.Status(c.UserContext(), fd.ID); ok {
		v.LastPoll = &st
	}
	var err error
	v.Polling, err = f.f.Polling(c.UserContext(), fd.ID)
	return v, err
}

func (f routes) listFeeds(c *fiber.Ctx) error {
	cursor, limit, err := api.PageQuery(c)
	if err != nil {
		return err
	}
	feeds, next, err := f.feedPage(c, cursor, limit)
	if err != nil {
		return err
	}
	out := feedPage{Items: make([]FeedView, 0, len(feeds)), NextCursor: next}
	for _, fd := range feeds {
		v, err := f.view(c, fd)
		if err != nil {
			return err
		}
		out.Items = append(out.Items, v)
	}
	return c.JSON(out)
}

func (f routes) getFeed(c *fiber.Ctx) error {
	fd, err := f.store.Feed(c.UserContext(), c.Params("id"))
	if err != nil {
		return apiError(err, "feed")
	}
	v, err := f.view(c, fd)
	return api.Reply(c, v, err)
}

func (f routes) deleteFeed(c *fiber.Ctx) error {
	ctx, id := c.UserContext(), c.Params("id")
	if !api.SeesAll(c) {
		// The tenant's own subscribables hold it, whoever else holds it.
		if own, err := f.ownSubscribables(c); err != nil {
			return err
		} else if len(own) > 0 {
			return apiError(fmt.Errorf("%w: feed %s still has %d subscribables", feed.ErrConflict, id, len(own)), "feed")
		}
		// A feed other tenants hold stays: this tenant lets go of it.
		othersHold, err := f.store.DropTenant(ctx, id, api.Tenant(c))
		if err != nil {
			return err
		}
		if othersHold {
			return c.SendStatus(http.StatusNoContent)
		}
	}
	if err := f.store.DeleteFeed(ctx, id); err != nil {
		if !api.SeesAll(c) {
			err = errors.Join(err, f.store.AddTenant(ctx, id, api.Tenant(c)))
		}
		return apiError(err, "feed")
	}
	return api.Deleted(c, f.f.FeedQuota(), id)
}

func (f routes) listItems(c *fiber.Ctx) error {
	if _, err := f.store.Feed(c.UserContext(), c.Params("id")); err != nil {
		return apiError(err, "feed")
	}
	cursor, limit, err := api.PageQuery(c)
	if err != nil {
		return err
	}
	// The cursor is the position of the next item by first seen (the
	// offset query of earlier versions is read the same way).
	offset := 0
	if cursor == "" {
		if offset, err = api.IntQuery(c, "offset", 0, 0, maxItemOffset); err != nil {
			return err
		}
	} else if offset, err = strconv.Atoi(cursor); err != nil || offset < 0 || offset > maxItemOffset {
		return api.BadRequest("invalid_cursor", "cursor must be a next_cursor of this list")
	}
	items, err := f.f.Items(c.UserContext(), c.Params("id"), offset, limit+1)
	if err != nil {
		return apiError(err, "feed")
	}
	page := itemPage{Items: items}
	if len(items) > limit {
		page.Items, page.NextCursor = items[:limit], strconv.Itoa(offset+limit)
	}
	return c.JSON(page)
}

// excludedItem is the answer to an item's exclusion.
type excludedItem struct {
	IID   string `json:"iid"`
	State string `json:"state"`
}

func (f routes) excludeItem(c *fiber.Ctx) error {
	before, err := f.f.Exclude(c.UserContext(), c.Params("id"), c.Params("iid"))
	if err != nil {
		return apiError(err, "item")
	}
	switch before {
	case "":
		return api.NotFound("item_not_found", "no such item")
	case feed.StateUnassigned, feed.StateExcluded:
		return c.JSON(excludedItem{IID: c.Params("iid"), State: feed.StateExcluded})
	}
	return api.Conflict("item_not_unassigned", "the item is "+before+"; only unassigned items can be excluded")
}

// held wraps the handler of a route under /v1/feeds/:id: a feed the
// caller's tenant does not hold answers as one that does not exist.
func (f routes) held(h fiber.Handler) fiber.Handler {
	return func(c *fiber.Ctx) error {
		ok, err := f.store.Holds(c.UserContext(), api.View(c), c.Params("id"))
		if err != nil {
			return err
		}
		if !ok {
			return apiError(feed.ErrNotFound, "feed")
		}
		return h(c)
	}
}

// heldSubscription answers not found for a subscription of a feed the
// caller's tenant does not hold.
func (f routes) heldSubscription(h fiber.Handler) fiber.Handler {
	return func(c *fiber.Ctx) error {
		sub, err := f.store.Subscription(c.UserContext(), c.Params("sid"))
		if err != nil {
			return apiError(err, "subscription")
		}
		ok, err := f.store.Holds(c.UserContext(), api.View(c), sub.FeedID)
		if err != nil {
			return err
		}
		if !ok || !api.View(c).Sees(sub.Tenant) {
			return apiError(feed.ErrNotFound, "subscription")
		}
		return h(c)
	}
}

// feedPage is the page of feeds the caller sees: all for admin keys and
// the open API, else its tenant's own.
func (f routes) feedPage(c *fiber.Ctx, cursor string, limit int) ([]feed.Feed, string, error) {
	if api.SeesAll(c) {
		return f.store.FeedPage(c.UserContext(), cursor, limit)
	}
	feeds, err := f.store.TenantFeeds(c.UserContext(), api.Tenant(c))
	if err != nil {
		return nil, "", err
	}
	page := api.PageOf(feeds, func(fd feed.Feed) string { return fd.ID }, cursor, limit)
	return page.Items, page.NextCursor, nil
}
