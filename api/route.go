package api

import (
	"errors"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// routeKey is the Locals key of the matched route pattern.
type routeKey struct{}

// resolveRoute records, once the chain below the access log has run, the
// pattern of the route that handled the request ("/v1/things/:id"), or ""
// when no route matched (Fiber's own 404 and 405). entry is c.Route() as
// seen by the calling middleware before c.Next, and err what c.Next returned.
//
// Fiber exposes no "matched" flag: when nothing matches, c.Route() is the
// last middleware that ran, whose Path is a mere prefix. So a request counts
// as unmatched when c.Route() did not move past the caller's own middleware
// route, or when the error is the router's own 404/405.
func resolveRoute(c *fiber.Ctx, entry *fiber.Route, err error) string {
	pattern := ""
	if r := c.Route(); r != nil && r != entry && !isRoutingError(err) {
		pattern = r.Path
	}
	c.Locals(routeKey{}, pattern)
	return pattern
}

// matchedRoute returns the pattern recorded by resolveRoute, or "" if none.
func matchedRoute(c *fiber.Ctx) string {
	p, _ := c.Locals(routeKey{}).(string)
	return p
}

// isRoutingError reports whether err is produced by Fiber's router when no
// route matches: ErrMethodNotAllowed, or a 404 "Cannot <METHOD> <path>".
func isRoutingError(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, fiber.ErrMethodNotAllowed) {
		return true
	}
	var fe *fiber.Error
	return errors.As(err, &fe) && fe.Code == fiber.StatusNotFound && strings.HasPrefix(fe.Message, "Cannot ")
}
