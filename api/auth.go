package api

import (
	"strings"

	"github.com/gofiber/fiber/v2"
)

// HeaderAPIKey is the alternative to "Authorization: Bearer <key>".
const HeaderAPIKey = "X-API-Key"

// scopeKey is the Locals key of the caller's scope.
type scopeKey struct{}

// CallerScope returns the scope of the API key that authenticated the
// request, and false when the route required no key or the API is open.
func CallerScope(c *fiber.Ctx) (Scope, bool) {
	sc, ok := c.Locals(scopeKey{}).(Scope)
	return sc, ok
}

// requireScope returns the handler guarding a route that needs required:
// no or an unknown key gives 401 "unauthenticated", a key with a lower scope
// 403 "forbidden". With no keys configured every request passes. A write
// beyond the caller's rate is then refused with 429 (see [RateLimitConfig]).
func (s *Server) requireScope(required Scope) fiber.Handler {
	if !required.Valid() {
		panic("api: invalid scope " + required.String())
	}
	return func(c *fiber.Ctx) error {
		if err := s.authorize(c, required); err != nil {
			return err
		}
		if err := s.limitWrites(c); err != nil {
			return err
		}
		return c.Next()
	}
}

// authorize checks the request's API key against required and records the
// caller's scope and identity.
func (s *Server) authorize(c *fiber.Ctx, required Scope) error {
	if s.keys.open() {
		return nil
	}
	presented, ok := presentedKey(c)
	if !ok {
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="dropstream"`)
		return Unauthorized("unauthenticated", "missing API key: send \"Authorization: Bearer <key>\" or \""+HeaderAPIKey+": <key>\"")
	}
	scope, ok := s.keys.lookup(presented)
	if !ok {
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="dropstream", error="invalid_token"`)
		return Unauthorized("unauthenticated", "invalid API key")
	}
	if !scope.Allows(required) {
		return Forbidden("forbidden", "this API key has scope "+scope.String()+"; the route requires "+required.String())
	}
	c.Locals(scopeKey{}, scope)
	c.Locals(callerKey{}, keyCaller(presented))
	return nil
}

// presentedKey extracts the API key from "Authorization: Bearer <key>" or,
// failing that, from X-API-Key. A non-Bearer Authorization header counts as
// no key.
func presentedKey(c *fiber.Ctx) (string, bool) {
	if auth := c.Get(fiber.HeaderAuthorization); auth != "" {
		scheme, token, ok := strings.Cut(strings.TrimSpace(auth), " ")
		if ok && strings.EqualFold(scheme, "Bearer") {
			if token = strings.TrimSpace(token); token != "" {
				return token, true
			}
		}
	}
	if key := strings.TrimSpace(c.Get(HeaderAPIKey)); key != "" {
		return key, true
	}
	return "", false
}
