// Package api is dropstream's HTTP API on Fiber v2.
//
// [New] builds a [Server] serving /healthz, /readyz and /metrics without a
// key; [Server.Handle] registers a feature route and documents it in
// /openapi.json. Every request gets a request id, a server span, metrics,
// an access log and panic recovery; each route its key scope and rate
// limit. Strings from a handler's context may be kept after it returns
// (Fiber's Immutable). Errors are the JSON envelope
// {"error":{"code","message"}}: a handler returns an [*Error] (a flow's
// errors mapped to them by [MapError], [Reply] or [NoContent]), any other
// error is a logged 500.
package api
