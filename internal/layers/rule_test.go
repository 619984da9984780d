// Package layers states the layer rule of the module's packages and
// checks it (see its test): dependencies only point down.
//
// From the bottom:
//
//  1. foundation: stream, otel, clickhouse and internal/* (the runtime,
//     telemetry, ClickHouse access and the shared building blocks), and
//     avail (the availability pipeline's message types, shared by its
//     stages). Foundation packages may import one another.
//  2. http: api, the HTTP framework (server, auth, errors, decoding,
//     OpenAPI, health). It imports no stage and no flow.
//  3. contract: flow, what every flow declares.
//  4. stages: collector, diff, writer and notifier, the design's top-level
//     stages. A stage package imports no other stage package, but for the
//     writer's batched ClickHouse append (writer/sink, writer/flowhistory),
//     which every flow's history goes through and which imports no flow;
//     the notifier imports no flow's types (it knows no flow), nor the
//     pipeline's writer (writer), which links the availability flow. The console (console) sits here too: it
//     reads every flow through the contract and serves its page with api.
//  5. flows: flows/<name>/... A flow may import another flow's root
//     package (the comic flow buys through the checkout flow), never its
//     sub-packages. Only a flow's httpapi package (and its bench package,
//     which serves the routes) imports api or Fiber: routes live there.
//  6. binary: cmd, e2e and deploy, which may import anything.
package layers

import "strings"

// Layer is a rank from the bottom (foundation) to the top (binary).
type Layer int

// The layers, bottom first.
const (
	Foundation Layer = iota + 1
	HTTP
	Contract
	Stages
	Flows
	Binary
)

// Of returns the layer of a package path relative to the module root
// ("flows/comic/httpapi"), and its unit: the package family inside which
// imports on the same layer are free ("notifier", "flows/comic"). Layer 0
// means a path outside the rule.
func Of(rel string) (Layer, string) {
	top, rest, _ := strings.Cut(rel, "/")
	switch top {
	case "stream", "otel", "clickhouse", "internal", "avail":
		return Foundation, "foundation"
	case "api":
		return HTTP, top
	case "flow":
		return Contract, top
	case "collector", "diff", "writer", "notifier", "console":
		return Stages, top
	case "flows":
		name, _, _ := strings.Cut(rest, "/")
		return Flows, "flows/" + name
	case "cmd", "e2e", "deploy":
		return Binary, top
	}
	return 0, ""
}

// Check returns why importing to (a package path relative to the module
// root, or an outside path such as "github.com/gofiber/fiber/v2") from
// from breaks the rule, or "" when it does not.
func Check(from, to string) string {
	fl, fu := Of(from)
	if fl == 0 || fl == Binary {
		return ""
	}
	if isFiber(to) {
		if fl == Flows && !routesPackage(from) {
			return "only a flow's httpapi (or bench) package imports Fiber"
		}
		return ""
	}
	tl, tu := Of(to)
	switch {
	case tl == 0:
		return ""
	case tl > fl:
		return "imports a layer above it"
	case fl == Stages && tl == Stages && fu != tu && !appendPath(to):
		return "a stage package imports another stage package"
	case fu == "notifier" && (to == "avail" || strings.HasPrefix(to, "avail/")):
		return "the notifier imports a flow's types"
	case appendPath(from) && (to == "avail" || strings.HasPrefix(to, "avail/")):
		return "the append path imports a flow's types"
	case fl == Flows && tl == HTTP && !routesPackage(from):
		return "only a flow's httpapi (or bench) package imports api"
	case fl == Flows && tl == Flows && fu != tu && strings.Count(to, "/") > 1:
		return "a flow imports another flow's sub-package"
	}
	return ""
}

// appendPath reports whether a path is the writer's ClickHouse append path,
// which every flow's history uses.
func appendPath(rel string) bool { return rel == "writer/sink" || rel == "writer/flowhistory" }

// routesPackage reports whether a flows path may serve routes: the flow's
// httpapi package or a bench package.
func routesPackage(rel string) bool {
	last := rel[strings.LastIndex(rel, "/")+1:]
	return last == "httpapi" || strings.HasSuffix(last, "bench")
}

func isFiber(path string) bool {
	return strings.HasPrefix(path, "github.com/gofiber/")
}
