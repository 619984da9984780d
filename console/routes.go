package console

import (
	"context"
	"errors"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/otel/spanbuffer"
	"github.com/dropstream/dropstream/stream"
)

// Bounds of the routes.
const (
	// maxDeadLetters bounds a dead-letter list.
	maxDeadLetters = 200
	// maxPayload bounds the payload shown with a dead letter.
	maxPayload = 4096
	// maxRefs bounds the dead letters named in one action.
	maxRefs = 500
	// maxCursorLen bounds a dead-letter cursor (a ref).
	maxCursorLen = 64
)

// session is GET /v1/console/session.
type session struct {
	// Scope is the caller's key scope ("read", "write", "admin"), or
	// "open" when the API has no keys.
	Scope string `json:"scope"`
	// JaegerUIURL, when set, opens a trace at <url>/trace/<id>.
	JaegerUIURL string `json:"jaeger_ui_url,omitempty"`
	// Traces says the process keeps recent traces.
	Traces bool `json:"traces"`
}

// graphView is GET /v1/console/graph: the flows' graph, and the flows
// that list events.
type graphView struct {
	flow.Graph
	EventFlows []string `json:"event_flows"`
}

// stagesView is GET /v1/console/stages: every stage, in the graph's order
// (a bounded list: the stages the flows declare).
type stagesView struct {
	Items []StageStats `json:"items"`
	At    time.Time    `json:"at"`
}

// deadLetter is one dead letter as listed.
type deadLetter struct {
	Ref      string    `json:"ref"`
	Stage    string    `json:"stage"`
	Reason   string    `json:"reason"`
	Attempts int       `json:"attempts"`
	At       time.Time `json:"at,omitzero"`
	OriginID string    `json:"origin_id"`
	Type     string    `json:"type"`
	Key      string    `json:"key"`
	Payload  string    `json:"payload"`
	// Clipped says Payload shows only the first 4 KiB.
	Clipped bool `json:"clipped,omitempty"`
}

// deadLetterPage is a page of a topic's dead letters, oldest first, and
// how many it holds.
type deadLetterPage struct {
	Topic string       `json:"topic"`
	Count int64        `json:"count"`
	Items []deadLetter `json:"items"`
	// NextCursor, when set, is the cursor of the next page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// deadLetterAction is the body of the replay and purge routes.
type deadLetterAction struct {
	Topic string `json:"topic"`
	// Refs name the dead letters ("partition/entry-id"); required.
	Refs []string `json:"refs"`
}

// actionResult answers an action.
type actionResult struct {
	Done int `json:"done"`
}

// eventPage is GET /v1/console/events.
type eventPage struct {
	Flow  string       `json:"flow"`
	Items []flow.Event `json:"items"`
}

// tracePage is GET /v1/console/traces: the kept traces, newest first (a
// bounded list: the process keeps the last ones).
type tracePage struct {
	Items []spanbuffer.Summary `json:"items"`
}

// traceView is GET /v1/console/traces/{id}.
type traceView struct {
	TraceID string            `json:"trace_id"`
	Spans   []spanbuffer.Span `json:"spans"`
}

func (c *Console) registerRoutes(srv *api.Server) {
	const tag = "console"
	srv.Handle(api.Operation{Method: "GET", Path: "/v1/console/session", Tag: tag, Scope: api.ScopeRead, Class: api.ClassRead,
		Summary: "The caller's scope and the console's settings", Response: session{}, Handler: c.session})
	srv.Handle(api.Operation{Method: "GET", Path: "/v1/console/graph", Tag: tag, Scope: api.ScopeRead, Class: api.ClassRead,
		Summary: "The flows' stages, services and topics, from their declarations", Response: graphView{}, Handler: c.graphRoute})
	srv.Handle(api.Operation{Method: "GET", Path: "/v1/console/stages", Tag: tag, Scope: api.ScopeRead, Class: api.ClassRead,
		Summary:  "Every stage's cluster-wide throughput, lag, pending entries, dead letters and copies (from Redis); p99 from this process",
		Response: stagesView{}, Handler: c.stagesRoute})
	srv.Handle(api.Operation{Method: "GET", Path: "/v1/console/deadletters", Tag: tag, Scope: api.ScopeRead, Class: api.ClassRead,
		Summary: "A topic's dead letters, oldest first, a page at a time, with reason, attempts, stage and payload",
		Query: []api.Param{{Name: "topic", Required: true, Description: "flow.name, a topic a stage reads"},
			{Name: "limit", Type: "integer", Description: "1..200 (default 50)"},
			{Name: "cursor", Description: "next_cursor of the previous page"}},
		Response: deadLetterPage{}, Handler: c.deadLetters})
	srv.Handle(api.Operation{Method: "POST", Path: "/v1/console/deadletters/replay", Tag: tag, Scope: api.ScopeAdmin, Class: api.ClassAdmin,
		Summary: "Put dead letters back on their stream as new messages", Body: deadLetterAction{}, Response: actionResult{},
		Handler: c.act(c.dead.Replay)})
	srv.Handle(api.Operation{Method: "POST", Path: "/v1/console/deadletters/purge", Tag: tag, Scope: api.ScopeAdmin, Class: api.ClassAdmin,
		Summary: "Delete dead letters", Body: deadLetterAction{}, Response: actionResult{}, Handler: c.act(c.dead.Purge)})
	srv.Handle(api.Operation{Method: "GET", Path: "/v1/console/events", Tag: tag, Scope: api.ScopeRead, Class: api.ClassRead,
		Summary: "A flow's recent events (transitions, notifications, checkouts), newest first, with their causes: the caller's tenant's and those of shared data (every tenant's for an admin key)",
		Query: []api.Param{{Name: "flow", Required: true, Description: "a flow of graph.event_flows"},
			{Name: "limit", Type: "integer", Description: "1..200 (default 50)"}},
		Response: eventPage{}, Handler: c.eventsRoute})
	srv.Handle(api.Operation{Method: "GET", Path: "/v1/console/traces", Tag: tag, Scope: api.ScopeRead, Class: api.ClassRead,
		Summary: "The last traces this process recorded, newest first", Response: tracePage{}, Handler: c.traces})
	srv.Handle(api.Operation{Method: "GET", Path: "/v1/console/traces/:id", Tag: tag, Scope: api.ScopeRead, Class: api.ClassRead,
		Summary: "One kept trace's spans, by start time, with their links", Response: traceView{}, Handler: c.trace})
	srv.Handle(api.Operation{Method: "GET", Path: "/v1/console/series", Tag: tag, Scope: api.ScopeRead, Class: api.ClassRead,
		Summary:  "The charts' samples of the last 15 minutes: every stage's cluster-wide throughput, lag and pending (from Redis) and this process's p99, and the availability board's openings and closings per minute",
		Response: seriesView{}, Handler: func(ctx *fiber.Ctx) error { return ctx.JSON(c.series.view(c.stages)) }})
}

func (c *Console) session(ctx *fiber.Ctx) error {
	s := session{Scope: "open", JaegerUIURL: c.cfg.JaegerUIURL, Traces: c.cfg.Traces != nil}
	if sc, ok := api.CallerScope(ctx); ok {
		s.Scope = sc.String()
	}
	return ctx.JSON(s)
}

func (c *Console) graphRoute(ctx *fiber.Ctx) error {
	v := graphView{Graph: c.graph, EventFlows: []string{}}
	for _, f := range c.cfg.Flows {
		if c.events[f.Name] != nil {
			v.EventFlows = append(v.EventFlows, f.Name)
		}
	}
	return ctx.JSON(v)
}

func (c *Console) stagesRoute(ctx *fiber.Ctx) error {
	items, err := c.sampler.stats(ctx.UserContext())
	return api.Reply(ctx, stagesView{Items: items, At: time.Now().UTC()}, err)
}

// topic returns the known topic named by s: 400 unknown_topic otherwise.
func (c *Console) topic(s string) (stream.Topic, error) {
	t, ok := c.topics[s]
	if !ok {
		return stream.Topic{}, api.BadRequest("unknown_topic", "topic: want a topic a stage reads (flow.name)")
	}
	return t, nil
}

func (c *Console) deadLetters(ctx *fiber.Ctx) error {
	t, err := c.topic(ctx.Query("topic"))
	if err != nil {
		return err
	}
	limit, err := api.IntQuery(ctx, "limit", 50, 1, maxDeadLetters)
	if err != nil {
		return err
	}
	n, err := c.dead.Count(ctx.UserContext(), t)
	if err != nil {
		return err
	}
	cursor := ctx.Query("cursor")
	if len(cursor) > maxCursorLen {
		return api.BadRequest("invalid_cursor", "cursor: too long")
	}
	// One more than the page tells whether another follows.
	dls, err := c.dead.ListAfter(ctx.UserContext(), t, cursor, limit+1)
	if err != nil {
		return api.MapError(err, api.When(stream.ErrBadRef, api.BadRequest("invalid_cursor", "cursor: want the next_cursor of a page (partition/entry-id)")))
	}
	page := deadLetterPage{Topic: t.String(), Count: n, Items: make([]deadLetter, 0, len(dls))}
	if len(dls) > limit {
		dls = dls[:limit]
		page.NextCursor = dls[limit-1].Ref()
	}
	for _, d := range dls {
		m := d.Message
		v := deadLetter{Ref: d.Ref(), Stage: d.Stage, Reason: d.Reason, Attempts: d.Attempts, At: d.At, OriginID: d.OriginID,
			Type: m.Type, Key: m.Key, Payload: string(m.Payload)}
		if len(m.Payload) > maxPayload {
			v.Payload, v.Clipped = string(m.Payload[:maxPayload]), true
		}
		page.Items = append(page.Items, v)
	}
	return ctx.JSON(page)
}

// act handles a dead-letter action over the refs of the body.
func (c *Console) act(do func(ctx context.Context, t stream.Topic, refs ...string) (int, error)) fiber.Handler {
	return func(ctx *fiber.Ctx) error {
		body, err := api.Body[deadLetterAction](ctx)
		if err != nil {
			return err
		}
		t, err := c.topic(body.Topic)
		if err != nil {
			return err
		}
		if len(body.Refs) == 0 || len(body.Refs) > maxRefs {
			return api.BadRequest("invalid_refs", "refs: name 1..500 dead letters (partition/entry-id)")
		}
		n, err := do(ctx.UserContext(), t, body.Refs...)
		if errors.Is(err, stream.ErrNotFound) {
			return api.NotFound("dead_letter_not_found", err.Error())
		}
		if err != nil {
			return api.BadRequest("invalid_refs", err.Error())
		}
		return ctx.JSON(actionResult{Done: n})
	}
}

func (c *Console) eventsRoute(ctx *fiber.Ctx) error {
	name := ctx.Query("flow")
	fn := c.events[name]
	if fn == nil {
		return api.BadRequest("unknown_flow", "flow: want a flow that lists events (graph.event_flows)")
	}
	limit, err := api.IntQuery(ctx, "limit", 50, 1, flow.MaxEvents)
	if err != nil {
		return err
	}
	// A caller sees its own tenant's events and those of shared data; an
	// admin key (or anyone on an open API) every tenant's.
	items, err := fn(ctx.UserContext(), api.View(ctx), limit)
	if err != nil {
		return err
	}
	if items == nil {
		items = []flow.Event{}
	}
	return ctx.JSON(eventPage{Flow: name, Items: items[:min(len(items), limit)]})
}

func (c *Console) traces(ctx *fiber.Ctx) error {
	page := tracePage{Items: []spanbuffer.Summary{}}
	if c.cfg.Traces != nil {
		page.Items = c.cfg.Traces.Traces()
	}
	return ctx.JSON(page)
}

func (c *Console) trace(ctx *fiber.Ctx) error {
	id := ctx.Params("id")
	var spans []spanbuffer.Span
	ok := false
	if c.cfg.Traces != nil && len(id) == 32 {
		spans, ok = c.cfg.Traces.Trace(id)
	}
	if !ok {
		return api.NotFound("trace_not_found", "this process keeps no trace "+clip.String(id, 64))
	}
	return ctx.JSON(traceView{TraceID: id, Spans: spans})
}
