package httpapi

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"

	"github.com/gofiber/fiber/v2"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/internal/egress"
	"github.com/dropstream/dropstream/internal/quota"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/subscriber"
)

// SubscriberRoutes manage subscribers and serve the keyless opt-in and
// unsubscribe links.
type SubscriberRoutes struct {
	Store *subscriber.Store
	// Notify publishes confirmation requests and removal notices.
	Notify func(ctx context.Context, reqs ...notifier.Request) error
	// PublicURL is the base of the links sent to subscribers.
	PublicURL string
	// Egress refuses destination URLs on denied hosts; nil: the default.
	Egress *egress.Policy
	// HasChannel reports whether a channel is configured; other destinations
	// get 422. Nil: all are.
	HasChannel func(channel string) bool
	// Quota caps each caller's subscribers; it must be the store's, which
	// frees removed ones' slots. Nil: no cap.
	Quota *quota.Quota
}

// preferencesBody is PUT /v1/subscribers/{id}/preferences.
type preferencesBody struct {
	TimeZone    string                 `json:"time_zone"`
	Preferences subscriber.Preferences `json:"preferences"`
}

// Register adds the routes to srv.
func (r SubscriberRoutes) Register(srv *api.Server) {
	srv.Handle(api.Operation{Method: "POST", Path: "/v1/subscribers", Tag: "subscribers", Scope: api.ScopeWrite, Class: api.ClassCreate,
		Summary: "Subscribe someone: each destination gets an opt-in link and receives nothing else until it is confirmed; webhook secrets are shown only here",
		Body:    subscriber.Subscriber{}, Response: subscriber.Subscriber{}, Status: http.StatusCreated, Handler: r.create})
	srv.Handle(api.Operation{Method: "GET", Path: "/v1/subscribers", Tag: "subscribers", Scope: api.ScopeRead, Class: api.ClassRead,
		Summary: "List subscribers", Query: []api.Param{{Name: "cursor"}, {Name: "limit", Type: "integer"}},
		Response: api.Page[subscriber.Subscriber]{}, Handler: r.list})
	srv.Handle(api.Operation{Method: "GET", Path: "/v1/subscribers/:id", Tag: "subscribers", Scope: api.ScopeRead, Class: api.ClassRead,
		Summary: "One subscriber", Response: subscriber.Subscriber{}, Handler: r.get})
	srv.Handle(api.Operation{Method: "PUT", Path: "/v1/subscribers/:id/preferences", Tag: "subscribers", Scope: api.ScopeWrite, Class: api.ClassChange,
		Summary: "Replace a subscriber's preferences (include/exclude, quiet hours, channel switches, digest) and time zone",
		Body:    preferencesBody{}, Response: subscriber.Subscriber{}, Handler: r.preferences})
	srv.Handle(api.Operation{Method: "DELETE", Path: "/v1/subscribers/:id", Tag: "subscribers", Scope: api.ScopeWrite, Class: api.ClassChange,
		Summary: "Remove a subscriber and every destination", Status: http.StatusNoContent, Handler: r.delete})
	for _, op := range []api.Operation{
		{Method: "GET", Path: notifier.ConfirmPath + ":token",
			Handler: r.askPage(subscriber.PurposeConfirm, notifier.ConfirmPath, "Confirm your subscription", "Send notifications to ", "Confirm"),
			Summary: "Opt-in link: a page asking to confirm the destination (a link prefetcher confirms nothing)"},
		{Method: "POST", Path: notifier.ConfirmPath + ":token", Handler: r.confirm,
			Summary: "Confirm the destination of the opt-in token; it receives notifications from then on"},
		{Method: "GET", Path: notifier.UnsubscribePath + ":token",
			Handler: r.askPage(subscriber.PurposeUnsubscribe, notifier.UnsubscribePath, "Unsubscribe", "Stop sending notifications to ", "Unsubscribe"),
			Summary: "Unsubscribe link: a page asking to confirm (a link prefetcher unsubscribes nothing)"},
		{Method: "POST", Path: notifier.UnsubscribePath + ":token", Handler: r.unsubscribe,
			Summary: "Unsubscribe the destination of the token and send it a removal notice (also RFC 8058 one-click)"},
	} {
		op.Tag, op.Public, op.Class, op.ContentType = "subscribers", true, api.ClassPublic, "text/html"
		srv.Handle(op)
	}
}

func (r SubscriberRoutes) create(c *fiber.Ctx) error {
	in, err := api.Body[subscriber.Subscriber](c)
	if err != nil {
		return err
	}
	texts := []api.TextField{api.Text("name", in.Name), api.Text("time_zone", in.TimeZone)}
	for _, d := range in.Destinations {
		texts = append(texts, api.Text("destinations.kind", d.Kind), api.Text("destinations.address", d.Address))
	}
	if err := api.CheckText(texts...); err != nil {
		return err
	}
	for i, d := range in.Destinations {
		if ch := d.Channel(); r.HasChannel != nil && !r.HasChannel(ch) {
			return api.UnprocessableEntity("channel_not_configured",
				fmt.Sprintf("field destinations[%d].kind: this server has no %s channel configured", i, ch))
		}
		if in.Destinations[i].Address, err = r.Egress.NormalizeURL(d.Address); err != nil {
			return api.UnprocessableEntity("invalid_subscriber", fmt.Sprintf("field destinations[%d].address: %v", i, err))
		}
	}
	ctx := c.UserContext()
	slot, err := api.Reserve(c, r.Quota, "subscribers")
	if err != nil {
		return err
	}
	in.Tenant = api.Tenant(c)
	created, err := r.Store.Create(ctx, in)
	if slotErr := api.Settle(c, slot, created.Subscriber.ID, true, err); slotErr != nil {
		return errors.Join(err, slotErr)
	}
	if err != nil {
		return api.MapError(err, api.When(subscriber.ErrInvalid, api.UnprocessableEntity("invalid_subscriber", "")),
			api.When(subscriber.ErrDuplicate, api.Conflict("already_subscribed", "")),
			api.When(subscriber.ErrTooMany, api.Conflict("too_many_subscribers", "")))
	}
	s := created.Subscriber
	reqs := make([]notifier.Request, 0, len(s.Destinations))
	for _, d := range s.Destinations {
		link := r.PublicURL + notifier.ConfirmPath + created.ConfirmTokens[d.ID]
		dest := d
		reqs = append(reqs, notifier.Request{Flow: "notifier", Event: "subscription.confirm", Subject: "subscription",
			SubscriberID: s.ID, Destination: &dest, Window: "confirm:" + d.ID, Critical: true,
			Title: "Please confirm your subscription", Text: "Confirm that you want these notifications: " + link})
	}
	if err := r.Notify(ctx, reqs...); err != nil {
		// The subscriber stays pending and expires unconfirmed.
		return err
	}
	return c.Status(http.StatusCreated).JSON(s)
}

func (r SubscriberRoutes) list(c *fiber.Ctx) error {
	return api.ListPage(c, subscriber.ErrInvalid, r.Store.ListIn)
}

func (r SubscriberRoutes) get(c *fiber.Ctx) error {
	s, err := r.Store.GetIn(c.UserContext(), api.View(c), c.Params("id"))
	return api.Reply(c, s, err, subscriberNotFound(c))
}

func (r SubscriberRoutes) preferences(c *fiber.Ctx) error {
	in, err := api.Body[preferencesBody](c)
	if err != nil {
		return err
	}
	s, err := r.Store.SetPreferencesIn(c.UserContext(), api.View(c), c.Params("id"), in.TimeZone, in.Preferences)
	return api.Reply(c, s, err, api.When(subscriber.ErrInvalid, api.UnprocessableEntity("invalid_preferences", "")), subscriberNotFound(c))
}

func (r SubscriberRoutes) delete(c *fiber.Ctx) error {
	return api.NoContent(c, r.Store.DeleteIn(c.UserContext(), api.View(c), c.Params("id")), subscriberNotFound(c))
}

// subscriberNotFound answers ErrNotFound for the subscriber the route
// names.
func subscriberNotFound(c *fiber.Ctx) api.Case {
	return api.When(subscriber.ErrNotFound, api.NotFound("subscriber_not_found", "no subscriber "+c.Params("id")))
}

// page is the links' HTML: a GET shows a form, only the POST acts, so
// prefetchers change nothing.
var page = template.Must(template.New("page").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><meta name="robots" content="noindex"><title>{{.Heading}}</title></head>
<body><h1>{{.Heading}}</h1><p>{{.Text}}</p>
{{if .Action}}<form method="post" action="{{.Action}}"><button type="submit">{{.Button}}</button></form>{{end}}
</body></html>`))

type pageData struct{ Heading, Text, Action, Button string }

// renderPage answers the page of d, or the 404 page of an expired link
// for an error wrapping subscriber.ErrTokenNotFound; it returns other
// errors.
func renderPage(c *fiber.Ctx, err error, d pageData) error {
	status := http.StatusOK
	if errors.Is(err, subscriber.ErrTokenNotFound) {
		status, d = http.StatusNotFound, goneLink
	} else if err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
	c.Set("Cache-Control", "no-store")
	c.Set("Referrer-Policy", "no-referrer")
	c.Status(status)
	return page.Execute(c.Response().BodyWriter(), d)
}

var goneLink = pageData{Heading: "Link expired", Text: "This link is unknown, already used or expired."}

// askPage returns the handler of a link's GET: a page asking ask and the
// destination's address, whose button POSTs the token of purpose to path.
func (r SubscriberRoutes) askPage(purpose, path, heading, ask, button string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		info, err := r.Store.Peek(c.UserContext(), c.Params("token"))
		if err == nil && info.Purpose != purpose {
			err = subscriber.ErrTokenNotFound
		}
		return renderPage(c, err, pageData{Heading: heading, Text: ask + info.Destination.Address + "?",
			Action: path + c.Params("token"), Button: button})
	}
}

func (r SubscriberRoutes) confirm(c *fiber.Ctx) error {
	_, d, err := r.Store.Confirm(c.UserContext(), c.Params("token"))
	return renderPage(c, err, pageData{Heading: "Subscribed", Text: d.Address + " will receive notifications."})
}

// unsubscribe removes the destination and sends a removal notice; it also
// serves RFC 8058 one-click POSTs.
func (r SubscriberRoutes) unsubscribe(c *fiber.Ctx) error {
	ctx := c.UserContext()
	s, d, err := r.Store.Unsubscribe(ctx, c.Params("token"))
	if err == nil {
		d.UnsubscribeToken = ""
		err = r.Notify(ctx, notifier.Request{Flow: "notifier", Event: "subscription.removed", Subject: "subscription", SubscriberID: s.ID,
			Destination: &d, Window: "removed:" + d.ID, Critical: true,
			Title: "You are unsubscribed", Text: d.Address + " will receive no more notifications."})
	}
	return renderPage(c, err, pageData{Heading: "Unsubscribed", Text: d.Address + " will receive no more notifications."})
}
