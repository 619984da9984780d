package api

import (
	"mime"
	"net/url"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// HeaderRequestedWith is a header a page of another site cannot send
// without a CORS preflight (which the API never grants): a browser client
// sets it (or its API key, or a JSON body) to write.
const HeaderRequestedWith = "X-Requested-With"

// errCrossSite refuses a write a page of another site sent.
var errCrossSite = Forbidden("cross_site",
	"a state-changing request from another site needs a JSON body (Content-Type: application/json) or an "+
		HeaderRequestedWith+", "+HeaderAPIKey+" or Authorization header")

// csrfMiddleware refuses cross-site writes a browser sends without a
// preflight. A POST, PUT, PATCH or DELETE whose Origin names another host
// than the request's own (Host, or X-Forwarded-Host behind a proxy), or
// that has no Origin but says Sec-Fetch-Site: cross-site or same-site, is
// refused with 403 "cross_site" unless it carries a JSON content type or
// a header no simple request may carry (X-Requested-With, X-API-Key,
// Authorization). Requests naming no origin at all (curl, services) and
// same-origin ones (the console) pass.
//
// Why: a simple request (text/plain, a form, or no body) reaches the
// server with no preflight, with the browser's ambient access to it (a
// user's network, an open API); everything else needs a CORS grant.
func csrfMiddleware(c *fiber.Ctx) error {
	switch c.Method() {
	case fiber.MethodPost, fiber.MethodPut, fiber.MethodPatch, fiber.MethodDelete:
	default:
		return c.Next()
	}
	if !crossSite(c) || preflighted(c) {
		return c.Next()
	}
	return errCrossSite
}

// crossSite reports whether the browser says the request comes from a
// page of another site.
func crossSite(c *fiber.Ctx) bool {
	if origin := c.Get(fiber.HeaderOrigin); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || u.Host == "" { // "null" (a sandboxed or file page) included
			return true
		}
		return !sameHost(u.Host, c.Get(fiber.HeaderHost)) && !sameHost(u.Host, c.Get(fiber.HeaderXForwardedHost))
	}
	switch strings.ToLower(c.Get("Sec-Fetch-Site")) {
	case "cross-site", "same-site":
		return true
	}
	return false
}

// sameHost compares two host[:port] values, case-insensitively.
func sameHost(a, b string) bool { return b != "" && strings.EqualFold(a, b) }

// preflighted reports whether the request carries something a simple
// request cannot: a JSON content type, or a non-safelisted header.
func preflighted(c *fiber.Ctx) bool {
	if c.Get(HeaderRequestedWith) != "" || c.Get(HeaderAPIKey) != "" || c.Get(fiber.HeaderAuthorization) != "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(c.Get(fiber.HeaderContentType))
	return err == nil && (mt == fiber.MIMEApplicationJSON || strings.HasSuffix(mt, "+json"))
}
