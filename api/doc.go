// Package api is dropstream's HTTP API, built on Fiber v2.
//
// A [Server] is created from a validated [Config] with [New]. It always serves
// three unauthenticated operational routes:
//
//	GET /healthz  200 {"status":"ok"} as long as the process answers
//	GET /readyz   200 or 503 with the result of every ReadinessCheck
//	GET /metrics  Config.MetricsHandler (not registered when nil)
//
// Feature routes are added by later packages through [Server.Group], which
// returns a router whose every route requires an API-key [Scope]:
//
//	v1 := srv.Group("/v1", api.ScopeRead)
//	v1.Get("/things/:id", getThing)
//	srv.Group("/v1", api.ScopeWrite).Post("/things", createThing)
//
// Several groups may share a prefix with different scopes: the scope check is
// attached to each route, not to the prefix.
//
// The Fiber app runs with Immutable set: strings from the context (c.Params,
// c.Query, c.Get, c.Body) may be kept after the handler returns.
//
// # Middleware
//
// Every request passes, outermost first, through:
//
//  1. request id ([RequestID]): honours a sane incoming X-Request-Id, else
//     generates one; echoed in the response;
//  2. OpenTelemetry server span, named "<METHOD> <route pattern>",
//     continuing an incoming W3C traceparent, and the histogram
//     [MetricRequestDuration] labelled by method, route template (or
//     [RouteUnmatched]) and status only, so that no Host header or path a
//     client sends adds a series to /metrics;
//  3. access log (slog, one Info record per request; Debug for the
//     operational routes);
//  4. panic recovery (500 envelope, panic logged with its stack);
//  5. per route: the API-key scope check (401 unauthenticated, 403 forbidden).
//
// The body limit is enforced by the HTTP server itself (413).
//
// # Errors
//
// Every error response, including Fiber's own (404, 405, 413, ...), is the
// JSON envelope
//
//	{"error":{"code":"not_found","message":"..."}}
//
// Handlers return an [*Error] (see [BadRequest], [NotFound], [Conflict], ...)
// to choose status, code and message; any other error becomes a logged 500
// with the message "internal error". [DecodeJSON] decodes request bodies
// strictly and reports problems as such errors.
package api
