package api

import (
	"github.com/gofiber/fiber/v2"
)

// Group returns a router, for tests, whose every route requires an API key
// with at least scope; it panics on an invalid scope.
func (s *Server) Group(prefix string, scope Scope) fiber.Router {
	return &scopedRouter{r: s.app.Group(prefix), guard: s.requireScope(scope, ClassUnset)}
}

// scopedRouter is a fiber.Router that prepends guard to every route.
type scopedRouter struct {
	r     fiber.Router
	guard fiber.Handler
}

var _ fiber.Router = (*scopedRouter)(nil)

func (g *scopedRouter) guarded(handlers []fiber.Handler) []fiber.Handler {
	out := make([]fiber.Handler, 0, len(handlers)+1)
	return append(append(out, g.guard), handlers...)
}

func (g *scopedRouter) wrap(r fiber.Router) *scopedRouter {
	return &scopedRouter{r: r, guard: g.guard}
}

// Use registers middleware without the scope check; see [Server.Group].
func (g *scopedRouter) Use(args ...interface{}) fiber.Router {
	g.r.Use(args...)
	return g
}

func (g *scopedRouter) Get(path string, handlers ...fiber.Handler) fiber.Router {
	g.r.Get(path, g.guarded(handlers)...)
	return g
}

func (g *scopedRouter) Head(path string, handlers ...fiber.Handler) fiber.Router {
	g.r.Head(path, g.guarded(handlers)...)
	return g
}

func (g *scopedRouter) Post(path string, handlers ...fiber.Handler) fiber.Router {
	g.r.Post(path, g.guarded(handlers)...)
	return g
}

func (g *scopedRouter) Put(path string, handlers ...fiber.Handler) fiber.Router {
	g.r.Put(path, g.guarded(handlers)...)
	return g
}

func (g *scopedRouter) Delete(path string, handlers ...fiber.Handler) fiber.Router {
	g.r.Delete(path, g.guarded(handlers)...)
	return g
}

func (g *scopedRouter) Connect(path string, handlers ...fiber.Handler) fiber.Router {
	g.r.Connect(path, g.guarded(handlers)...)
	return g
}

func (g *scopedRouter) Options(path string, handlers ...fiber.Handler) fiber.Router {
	g.r.Options(path, g.guarded(handlers)...)
	return g
}

func (g *scopedRouter) Trace(path string, handlers ...fiber.Handler) fiber.Router {
	g.r.Trace(path, g.guarded(handlers)...)
	return g
}

func (g *scopedRouter) Patch(path string, handlers ...fiber.Handler) fiber.Router {
	g.r.Patch(path, g.guarded(handlers)...)
	return g
}

func (g *scopedRouter) Add(method, path string, handlers ...fiber.Handler) fiber.Router {
	g.r.Add(method, path, g.guarded(handlers)...)
	return g
}

func (g *scopedRouter) All(path string, handlers ...fiber.Handler) fiber.Router {
	g.r.All(path, g.guarded(handlers)...)
	return g
}

// Static serves files under prefix behind a prefix-wide scope check.
func (g *scopedRouter) Static(prefix, root string, config ...fiber.Static) fiber.Router {
	g.r.Use(prefix, g.guard)
	g.r.Static(prefix, root, config...)
	return g
}

// Mount mounts app under prefix behind a prefix-wide scope check.
func (g *scopedRouter) Mount(prefix string, app *fiber.App) fiber.Router {
	g.r.Use(prefix, g.guard)
	g.r.Mount(prefix, app)
	return g
}

// Group returns a nested scoped router; handlers run as middleware before
// the scope check (see [Server.Group]).
func (g *scopedRouter) Group(prefix string, handlers ...fiber.Handler) fiber.Router {
	return g.wrap(g.r.Group(prefix, handlers...))
}

func (g *scopedRouter) Route(prefix string, fn func(router fiber.Router), name ...string) fiber.Router {
	return g.wrap(g.r.Route(prefix, func(r fiber.Router) { fn(g.wrap(r)) }, name...))
}

func (g *scopedRouter) Name(name string) fiber.Router {
	g.r.Name(name)
	return g
}
