// Package api is dropstream's HTTP API, built on Fiber v2.
//
// [New] builds a [Server] from a [Config]. It serves GET /healthz, GET
// /readyz (every ReadinessCheck) and GET /metrics (Config.MetricsHandler)
// without a key; feature routes are registered with [Server.Handle], which
// also documents them in /openapi.json. Strings from a handler's context may
// be kept after it returns (Fiber's Immutable).
//
// Every request passes, outermost first, through the request id
// ([RequestID]), an OpenTelemetry server span and [MetricRequestDuration]
// (labelled by method, route template and status only), the access log,
// panic recovery, and per route the API-key scope check and rate limit.
//
// Every error response is the JSON envelope
// {"error":{"code":"not_found","message":"..."}}. Handlers return an
// [*Error] ([BadRequest], [NotFound], ...) to choose it; any other error is
// a logged 500 "internal error".
package api
