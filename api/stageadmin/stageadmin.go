// Package stageadmin serves the administration of a deployment's stream
// stages on the API server, under /v1/admin/stages, every route with the
// admin scope: the list of stages with whether each is paused, pausing and
// resuming a stage across all its copies in every process (see
// stream.Control), and the accounting of a stage's messages (see
// stream.Conservation).
//
// A stage the binary does not know answers 404 "stage_not_found".
package stageadmin

import (
	"context"
	"net/http"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/stream"
)

// Stage is a stage as the routes know it: its name, topic and consumer
// group.
type Stage struct {
	Name  string
	Topic stream.Topic
	Group string
}

// StageOut is a stage with its paused state.
type StageOut struct {
	Stage      string `json:"stage"`
	Stream     string `json:"stream"`
	Group      string `json:"group"`
	Partitions int    `json:"partitions"`
	Paused     bool   `json:"paused"`
	// PausedAt is when the stage was paused, RFC 3339; absent while it runs.
	PausedAt string `json:"paused_at,omitempty"`
}

// routes serves the stages over ctl.
type routes struct {
	ctl    *stream.Control
	stages map[string]Stage
	all    []Stage
}

// Register adds the stage administration routes over stages (every stage
// the binary knows) to srv.
func Register(srv *api.Server, ctl *stream.Control, stages []Stage) {
	r := &routes{ctl: ctl, stages: make(map[string]Stage, len(stages)), all: stages}
	for _, s := range stages {
		r.stages[s.Name] = s
	}
	op := func(method, path, summary string, resp any, query []api.Param, h fiber.Handler) {
		// Reads are limited as reads: an operator's dashboard polling
		// them never spends the budget of the actions.
		class := api.ClassAdmin
		if method == http.MethodGet {
			class = api.ClassRead
		}
		srv.Handle(api.Operation{Method: method, Path: path, Summary: summary, Tag: "admin", Scope: api.ScopeAdmin, Class: class,
			Query: query, Response: resp, Handler: h})
	}
	paging := []api.Param{
		{Name: "cursor", In: "query", Description: "next_cursor of the previous page"},
		{Name: "limit", In: "query", Type: "integer", Description: "page size, 1..1000 (default 100)"},
	}
	op(http.MethodGet, "/v1/admin/stages", "The stages with whether each is paused, by name", api.Page[StageOut]{}, paging, r.list)
	op(http.MethodPost, "/v1/admin/stages/:stage/pause",
		"Pause a stage in every process: each copy finishes its batch in hand and stops reading; its lag keeps being reported",
		StageOut{}, nil, r.set(ctl.Pause))
	op(http.MethodPost, "/v1/admin/stages/:stage/resume", "Resume a paused stage: its copies read again within a second",
		StageOut{}, nil, r.set(ctl.Resume))
	op(http.MethodGet, "/v1/admin/stages/:stage/conservation",
		"The accounting of a stage's messages: published = acked + dead_lettered + dropped + skipped + delayed + requeued + pending + lag; drift is the difference, 0 unless messages were lost",
		ConservationOut{}, nil, r.conservation)
}

// ConservationOut is the accounting of a stage's messages over every
// partition of its topic (see stream.Conservation).
type ConservationOut struct {
	Stage string `json:"stage"`
	stream.Conservation
}

func (r *routes) conservation(c *fiber.Ctx) error {
	s, err := r.stage(c)
	if err != nil {
		return err
	}
	cons, err := r.ctl.Conservation(c.UserContext(), s.Topic, s.Group)
	return api.Reply(c, ConservationOut{Stage: s.Name, Conservation: cons}, err)
}

// stage returns the stage named by the path, or 404.
func (r *routes) stage(c *fiber.Ctx) (Stage, error) {
	s, ok := r.stages[c.Params("stage")]
	if !ok {
		return Stage{}, api.NotFound("stage_not_found", "no stage of that name; GET /v1/admin/stages lists them")
	}
	return s, nil
}

// StateOf returns the stage with its paused state, given every paused
// stage as stream.Control.Paused returns them.
func StateOf(s Stage, paused map[string]time.Time) StageOut {
	pausedAt, ok := paused[s.Name]
	o := StageOut{Stage: s.Name, Stream: s.Topic.String(), Group: s.Group, Partitions: s.Topic.Partitions, Paused: ok}
	if ok && !pausedAt.IsZero() {
		o.PausedAt = pausedAt.UTC().Format(time.RFC3339)
	}
	return o
}

func (r *routes) list(c *fiber.Ctx) error {
	return api.ListAll(c, func(o StageOut) string { return o.Stage }, func() ([]StageOut, error) {
		paused, err := r.ctl.Paused(c.UserContext())
		all := make([]StageOut, 0, len(r.all))
		for _, s := range r.all {
			all = append(all, StateOf(s, paused))
		}
		return all, err
	})
}

// set returns the handler applying pause or resume to the stage of the
// path; it answers the stage's state afterwards.
func (r *routes) set(apply func(context.Context, string) error) fiber.Handler {
	return func(c *fiber.Ctx) error {
		s, err := r.stage(c)
		if err != nil {
			return err
		}
		if err := apply(c.UserContext(), s.Name); err != nil {
			return err
		}
		paused, err := r.ctl.Paused(c.UserContext())
		return api.Reply(c, StateOf(s, paused), err)
	}
}
