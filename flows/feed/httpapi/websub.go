package httpapi

import (
	"cmp"
	"net/http"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/flows/feed"
)

// Bounds of the WebSub verification's query.
const (
	maxChallenge = 256
	maxTopic     = 2048
)

var webSubParams = []api.Param{
	{Name: "hub.mode", Required: true, Description: "subscribe or denied"},
	{Name: "hub.topic", Required: true, Description: "the topic the feed subscribed to"},
	{Name: "hub.challenge", Description: "echoed back to verify the subscription (subscribe)"},
	{Name: "hub.lease_seconds", Type: "integer", Description: "the lease the hub grants (subscribe)"},
	{Name: "hub.reason", Description: "why the hub denied the subscription (denied)"},
}

// registerWebSub adds each feed's public WebSub callback; its last segment
// is a secret only the hub knows, and pushes carry an HMAC signature.
func (f routes) registerWebSub(srv *api.Server) {
	path := feed.WebSubPath + ":id/:token"
	srv.Handle(api.Operation{Method: "GET", Path: path, Tag: "feeds", Public: true, Class: api.ClassPublic, ContentType: "text/plain", Query: webSubParams,
		Summary: "WebSub verification of intent: a hub confirms the subscription the flow asked it for, on the callback (with its secret token) it was given, before the request expires (the challenge is echoed back; the lease is capped at the one asked), or says it denied it; anything else is 404",
		Handler: f.verifyWebSub})
	srv.Handle(api.Operation{Method: "POST", Path: path, Tag: "feeds", Public: true, Class: api.ClassPublic, Status: http.StatusAccepted,
		Summary: "WebSub content distribution: on the callback (with its secret token) of an active subscription, the hub pushes the feed's new content (RSS or Atom, signed with X-Hub-Signature: sha1=, sha256= or sha512= HMAC of the body with the subscription's secret); it goes through the same item pipeline as a poll. 403 for a bad signature, 404 without an active subscription",
		Handler: f.pushWebSub})
}

func (f routes) verifyWebSub(c *fiber.Ctx) error {
	mode, topic, challenge := c.Query("hub.mode"), c.Query("hub.topic"), c.Query("hub.challenge")
	if err := api.CheckText(api.Text("hub.mode", mode), api.Text("hub.topic", topic), api.Text("hub.challenge", challenge)); err != nil {
		return err
	}
	if len(topic) > maxTopic || len(challenge) > maxChallenge || len(c.Query("hub.reason")) > maxTopic {
		return api.BadRequest("invalid_websub", "hub.topic, hub.challenge or hub.reason too long")
	}
	if mode == "subscribe" && challenge == "" {
		return api.BadRequest("invalid_websub", "hub.challenge is required to subscribe")
	}
	lease := 0
	if raw := c.Query("hub.lease_seconds"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 0 || n > 10*365*24*3600 {
			return api.BadRequest("invalid_websub", "hub.lease_seconds must be a number of seconds")
		}
		lease = n
	}
	if err := f.f.VerifyWebSub(c.UserContext(), c.Params("id"), c.Params("token"), mode, topic, lease); err != nil {
		return api.MapError(err, api.When(feed.ErrNotFound, api.NotFound("websub_not_found", "no such subscription asked for")))
	}
	c.Set(fiber.HeaderContentType, "text/plain")
	return c.Status(http.StatusOK).SendString(challenge)
}

func (f routes) pushWebSub(c *fiber.Ctx) error {
	sig := cmp.Or(c.Get("X-Hub-Signature-256"), c.Get("X-Hub-Signature"))
	if err := f.f.Push(c.UserContext(), c.Params("id"), c.Params("token"), c.Body(), sig); err != nil {
		return api.MapError(err, api.When(feed.ErrNotFound, api.NotFound("websub_not_found", "no active subscription for this feed")),
			api.When(feed.ErrBadSignature, api.Forbidden("invalid_signature", "X-Hub-Signature does not match the content")),
			api.When(feed.ErrTooLarge, api.NewError(http.StatusRequestEntityTooLarge, "too_large", "")),
			api.When(feed.ErrInvalid, api.UnprocessableEntity("invalid_feed", "the pushed content is not an RSS or Atom feed")))
	}
	c.Status(http.StatusAccepted) // no body: SendStatus would add "Accepted"
	return nil
}
