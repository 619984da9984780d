// Package httpapi serves the feed flow's API: feeds, their items,
// subscribables, their collections and subscriptions.
package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
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

// subscribeBody is the body of POST .../subscriptions.
type subscribeBody struct {
	Destination feed.Destination `json:"destination"`
}

// routes are the handlers of the feed API over one flow.
type routes struct {
	f     *feed.Flow
	store *feed.Store
}

// Register adds the feed API to srv. Opt-in and unsubscribe links are the
// notifier's (api.SubscriberRoutes).
func Register(srv *api.Server, fl *feed.Flow) {
	f := routes{f: fl, store: fl.Store()}
	tag := "feeds"
	srv.Handle(api.Operation{Method: "POST", Path: "/v1/feeds", Tag: tag, Scope: api.ScopeWrite, Class: api.ClassCreate, Status: http.StatusCreated,
		Summary: "Add a feed (its id derives from its URL; adding it again returns it with 200)", Body: feed.Feed{}, Response: feed.Feed{},
		OtherStatuses: []int{http.StatusOK}, Handler: f.postFeed})
	srv.Handle(api.Operation{Method: "GET", Path: "/v1/feeds", Tag: tag, Scope: api.ScopeRead, Class: api.ClassRead,
		Summary: "List feeds with their latest poll, by id", Query: pageParams, Response: feedPage{}, Handler: f.listFeeds})
	srv.Handle(api.Operation{Method: "GET", Path: "/v1/feeds/:id", Tag: tag, Scope: api.ScopeRead, Class: api.ClassRead,
		Summary: "One feed with its latest poll", Response: FeedView{}, Handler: f.held(f.getFeed)})
	srv.Handle(api.Operation{Method: "DELETE", Path: "/v1/feeds/:id", Tag: tag, Scope: api.ScopeWrite, Class: api.ClassChange, Status: http.StatusNoContent,
		Summary: "Remove a feed and its items (409 while it has subscribables)", Handler: f.held(f.deleteFeed)})
	srv.Handle(api.Operation{Method: "GET", Path: "/v1/feeds/:id/items", Tag: tag, Scope: api.ScopeRead, Class: api.ClassRead,
		Summary: "A feed's items by first seen, with state and timestamps", Response: itemPage{},
		Query: pageParams, Handler: f.held(f.listItems)})
	srv.Handle(api.Operation{Method: "POST", Path: "/v1/feeds/:id/items/:iid/exclude", Tag: tag, Scope: api.ScopeWrite, Class: api.ClassChange,
		Summary: "Exclude an unassigned item: it is never sent", Response: excludedItem{}, Handler: f.held(f.excludeItem)})
	srv.Handle(api.Operation{Method: "POST", Path: "/v1/feeds/:id/subscribables", Tag: tag, Scope: api.ScopeWrite, Class: api.ClassCreate, Status: http.StatusCreated,
		Summary: "Define a subscription (each item, daily, weekly, every n)", Body: feed.Subscribable{}, Response: feed.Subscribable{},
		OtherStatuses: []int{http.StatusOK}, Handler: f.held(f.postSubscribable)})
	srv.Handle(api.Operation{Method: "GET", Path: "/v1/feeds/:id/subscribables", Tag: tag, Scope: api.ScopeRead, Class: api.ClassRead,
		Summary: "A feed's subscribables, by name", Query: pageParams, Response: subscribablePage{}, Handler: f.held(f.listSubscribables)})
	srv.Handle(api.Operation{Method: "GET", Path: "/v1/feeds/:id/subscribables/:name", Tag: tag, Scope: api.ScopeRead, Class: api.ClassRead,
		Summary: "One subscribable", Response: feed.Subscribable{}, Handler: f.held(f.getSubscribable)})
	srv.Handle(api.Operation{Method: "GET", Path: "/v1/feeds/:id/subscribables/:name/collections", Tag: tag, Scope: api.ScopeRead, Class: api.ClassRead,
		Summary: "A subscribable's collections: the open ones (opened, due) and the completed ones waiting for their delivery (delivered ones are deleted)",
		Query:   pageParams, Response: collectionPage{}, Handler: f.held(f.listCollections)})
	srv.Handle(api.Operation{Method: "DELETE", Path: "/v1/feeds/:id/subscribables/:name", Tag: tag, Scope: api.ScopeWrite, Class: api.ClassChange, Status: http.StatusNoContent,
		Summary: "Remove a subscribable and its subscriptions", Handler: f.held(f.deleteSubscribable)})
	srv.Handle(api.Operation{Method: "POST", Path: "/v1/feeds/:id/subscribables/:name/subscriptions", Tag: tag, Scope: api.ScopeWrite, Class: api.ClassCreate,
		Status: http.StatusCreated, OtherStatuses: []int{http.StatusOK}, Body: subscribeBody{}, Response: feed.Subscription{},
		Summary: "Subscribe a destination: e-mail and webhook destinations are notifier subscribers, unconfirmed until the notifier's opt-in link sent to them is followed (an address already confirmed there is confirmed at once); a webhook secret is shown only when its notifier destination is created", Handler: f.held(f.postSubscription)})
	srv.Handle(api.Operation{Method: "GET", Path: "/v1/feeds/:id/subscribables/:name/subscriptions", Tag: tag, Scope: api.ScopeRead, Class: api.ClassRead,
		Summary: "A subscribable's subscriptions, confirmed as the notifier says (unsubscribed ones are left out), by id", Query: pageParams, Response: subscriptionPage{}, Handler: f.held(f.listSubscriptions)})
	srv.Handle(api.Operation{Method: "DELETE", Path: "/v1/feed-subscriptions/:sid", Tag: tag, Scope: api.ScopeWrite, Class: api.ClassChange, Status: http.StatusNoContent,
		Summary: "Remove a subscription", Handler: f.heldSubscription(f.deleteSubscription)})
	srv.Handle(api.Operation{Method: "POST", Path: "/v1/feeds/:id/resume", Tag: tag, Scope: api.ScopeWrite, Class: api.ClassChange,
		Summary: "Poll a gone or dead feed again (its halt and its run of failures forgotten); a polled feed is left as it is", Response: FeedView{},
		Handler: f.held(f.resumeFeed)})
	f.registerWebSub(srv)
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

func (f routes) postSubscribable(c *fiber.Ctx) error {
	in, err := api.Body[feed.Subscribable](c)
	if err != nil {
		return err
	}
	if err := api.CheckText(api.Text("name", in.Name)); err != nil {
		return err
	}
	in.FeedID, in.Tenant = c.Params("id"), api.Tenant(c)
	out, created, err := f.store.PutSubscribable(c.UserContext(), in)
	if err != nil {
		return apiError(err, "subscribable")
	}
	return api.Created(c, created, out)
}

func (f routes) listSubscribables(c *fiber.Ctx) error {
	if _, err := f.store.Feed(c.UserContext(), c.Params("id")); err != nil {
		return apiError(err, "feed")
	}
	return api.ListAll(c, feed.Subscribable.Key, func() ([]feed.Subscribable, error) { return f.ownSubscribables(c) })
}

func (f routes) getSubscribable(c *fiber.Ctx) error {
	sb, err := f.subscribable(c)
	return api.Reply(c, sb, err)
}

func (f routes) listCollections(c *fiber.Ctx) error {
	return pageOfSubscribable(f, c, f.f.Collections, func(v feed.CollectionView) string { return v.Within + "/" + v.State })
}

func (f routes) deleteSubscribable(c *fiber.Ctx) error {
	sb, err := f.subscribable(c)
	if err != nil {
		return err
	}
	return api.NoContent(c, apiError(f.store.DeleteSubscribable(c.UserContext(), c.Params("id"), sb.Key()), "subscribable"))
}

func (f routes) postSubscription(c *fiber.Ctx) error {
	in, err := api.Body[subscribeBody](c)
	if err != nil {
		return err
	}
	sb, err := f.subscribable(c)
	if err != nil {
		return err
	}
	if in.Destination.URL, err = f.f.Egress().NormalizeURL(in.Destination.URL); err != nil {
		return api.UnprocessableEntity("invalid_subscription", "field destination.url: "+err.Error())
	}
	slot, err := api.Reserve(c, f.f.SubscriptionQuota(), "feed subscriptions")
	if err != nil {
		return err
	}
	sub, created, err := f.f.Subscribe(c.UserContext(), c.Params("id"), sb.Key(), in.Destination)
	if err := api.Settle(c, slot, sub.ID, created, err); err != nil {
		return err
	}
	if err != nil {
		return apiError(err, "subscription")
	}
	return api.Created(c, created, sub)
}

func (f routes) listSubscriptions(c *fiber.Ctx) error {
	list := func(ctx context.Context, feedID, key string) ([]feed.Subscription, error) {
		subs, err := f.f.Subscriptions(ctx, feedID, key)
		for i := range subs {
			subs[i] = subs[i].Public()
		}
		return subs, err
	}
	return pageOfSubscribable(f, c, list, func(s feed.Subscription) string { return s.ID })
}

// pageOfSubscribable answers a page, by key, of what list returns for the
// subscribable the route names.
func pageOfSubscribable[T any](f routes, c *fiber.Ctx, list func(ctx context.Context, feedID, key string) ([]T, error), key func(T) string) error {
	sb, err := f.subscribable(c)
	if err != nil {
		return err
	}
	return api.ListAll(c, key, func() ([]T, error) { return list(c.UserContext(), c.Params("id"), sb.Key()) })
}

func (f routes) deleteSubscription(c *fiber.Ctx) error {
	if err := f.store.DeleteSubscription(c.UserContext(), c.Params("sid")); err != nil {
		return apiError(err, "subscription")
	}
	return api.Deleted(c, f.f.SubscriptionQuota(), c.Params("sid"))
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
	ids, err := f.store.TenantFeeds(c.UserContext(), api.Tenant(c))
	if err != nil {
		return nil, "", err
	}
	feeds := make([]feed.Feed, 0, len(ids))
	for _, id := range ids {
		fd, err := f.store.Feed(c.UserContext(), id)
		if errors.Is(err, feed.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		feeds = append(feeds, fd)
	}
	page := api.PageOf(feeds, func(fd feed.Feed) string { return fd.ID }, cursor, limit)
	return page.Items, page.NextCursor, nil
}

// subscribable returns the caller's tenant's subscribable the route names;
// a caller that sees all falls back to any tenant's of that name.
func (f routes) subscribable(c *fiber.Ctx) (feed.Subscribable, error) {
	ctx, feedID, name := c.UserContext(), c.Params("id"), c.Params("name")
	sb, err := f.store.Subscribable(ctx, feedID, feed.SubscribableKey(api.Tenant(c), name))
	if errors.Is(err, feed.ErrNotFound) && api.SeesAll(c) {
		all, lerr := f.store.Subscribables(ctx, feedID)
		if lerr != nil {
			return feed.Subscribable{}, lerr
		}
		for _, other := range all {
			if other.Name == name {
				return other, nil
			}
		}
	}
	if err != nil {
		return feed.Subscribable{}, apiError(err, "subscribable")
	}
	return sb, nil
}

// ownSubscribables returns the subscribables of the route's feed the
// caller sees, by key: its tenant's own, or every tenant's.
func (f routes) ownSubscribables(c *fiber.Ctx) ([]feed.Subscribable, error) {
	all, err := f.store.Subscribables(c.UserContext(), c.Params("id"))
	if err != nil {
		return nil, err
	}
	v := api.View(c)
	return slices.DeleteFunc(all, func(sb feed.Subscribable) bool { return !v.Sees(sb.Tenant) }), nil
}
