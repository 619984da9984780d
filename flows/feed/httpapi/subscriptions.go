package httpapi

import (
	"context"
	"errors"
	"slices"

	"github.com/gofiber/fiber/v2"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/flows/feed"
)

// subscribeBody is the body of POST .../subscriptions.
type subscribeBody struct {
	Destination feed.Destination `json:"destination"`
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
