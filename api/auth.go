package api

import (
	"cmp"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/dropstream/dropstream/internal/tenancy"
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
// 403 "forbidden". With no keys configured every request passes. A request
// beyond the caller's limit for class is then refused with 429 (see
// [RateLimitConfig]); ClassUnset takes the class of the request's method
// (a route added through [Server.Group]).
func (s *Server) requireScope(required Scope, class Class) fiber.Handler {
	if !required.Valid() {
		panic("api: invalid scope " + required.String())
	}
	return func(c *fiber.Ctx) error {
		if err := s.authorize(c, required); err != nil {
			return err
		}
		if err := s.limit(c, class); err != nil {
			return err
		}
		return c.Next()
	}
}

// authorize checks the request's API key against required and records the
// caller's scope and identity.
func (s *Server) authorize(c *fiber.Ctx, required Scope) error {
	if s.keys.open() {
		c.Locals(tenantKey{}, OpenTenant)
		c.Locals(seesAllKey{}, true)
		return nil
	}
	presented, ok := presentedKey(c)
	if !ok {
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="dropstream"`)
		return Unauthorized("unauthenticated", "missing API key: send \"Authorization: Bearer <key>\" or \""+HeaderAPIKey+": <key>\"")
	}
	key, ok := s.keys.lookup(presented)
	scope := key.scope
	if !ok {
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="dropstream", error="invalid_token"`)
		return Unauthorized("unauthenticated", "invalid API key")
	}
	if !scope.Allows(required) {
		return Forbidden("forbidden", "this API key has scope "+scope.String()+"; the route requires "+required.String())
	}
	caller := keyCaller(presented)
	tenant := cmp.Or(key.tenant, caller)
	c.Locals(scopeKey{}, scope)
	c.Locals(callerKey{}, caller)
	c.Locals(tenantKey{}, tenant)
	c.Locals(keyLimitsKey{}, key.limits)
	c.Locals(seesAllKey{}, scope == ScopeAdmin)
	return nil
}

// OpenTenant is the one tenant of an open API (no keys configured).
const OpenTenant = tenancy.Open

// tenantKey and keyLimitsKey are the Locals keys of the caller's tenant and
// of its key's own write limits.
type (
	tenantKey    struct{}
	keyLimitsKey struct{}
	seesAllKey   struct{}
)

// Tenant returns who owns what the request creates, and whose objects it
// may see: the key's tenant= field, else the key itself (the same
// identity as [Caller]). On an open API, and on routes that need no key,
// it is [OpenTenant].
func Tenant(c *fiber.Ctx) string {
	if t, ok := c.Locals(tenantKey{}).(string); ok {
		return t
	}
	return OpenTenant
}

// SeesAll reports whether the caller may see and change every tenant's
// objects: an admin key, or anyone on an open API (one tenant). It is
// false on routes that need no key.
func SeesAll(c *fiber.Ctx) bool {
	all, _ := c.Locals(seesAllKey{}).(bool)
	return all
}

// CallerLimits returns the write limits the caller's key carries (zero
// fields: the route class's defaults).
func CallerLimits(c *fiber.Ctx) KeyLimits {
	l, _ := c.Locals(keyLimitsKey{}).(KeyLimits)
	return l
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
