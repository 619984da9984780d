package api

import (
	"mime"
	"net/url"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// HeaderRequestedWith is a header a page of another site cannot send
// without a CORS preflight; a browser client sets it to write.
const HeaderRequestedWith = "X-Requested-With"

// errCrossSite refuses a write a page of another site sent.
var errCrossSite = Forbidden("cross_site",
	"a state-changing request from another site needs a JSON body (Content-Type: application/json) or an "+
		HeaderRequestedWith+", "+HeaderAPIKey+" or Authorization header")

// csrfMiddleware refuses with 403 "cross_site" a write from a page of
// another site that carries neither a JSON content type nor a header no
// simple request may carry. Requests naming no origin (curl) and
// same-origin ones (the console) pass.
//
// Why: a simple request reaches the server with no preflight, with the
// browser's ambient access to it; everything else needs a CORS grant.
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

// crossSite reports whether the request's Origin (or Sec-Fetch-Site)
// names another site than its Host or X-Forwarded-Host.
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
