package flow_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/flow/flowtest"
	"github.com/dropstream/dropstream/stream"
)

type fakeFlow struct{ desc flow.Description }

func (f *fakeFlow) Describe() flow.Description { return f.desc }
func (f *fakeFlow) Close() error               { return nil }

func noop(context.Context) error { return nil }

func TestDescription_validateNamesEdgesAndHistory(t *testing.T) {
	ticks := stream.NewTopic("x", "ticks", 2)
	good := flow.Description{
		Stages:   []stream.Stage{{Name: "x-a", Topic: ticks}},
		Services: []flow.Service{{Name: "x-poller", Run: noop}},
		Edges:    []flow.Edge{{From: "x-poller", Topic: ticks}, {From: flow.FromAPI, Topic: ticks}},
		History: []flow.History{{Tables: []string{"t"}, Groups: []flow.Group{{Topic: ticks, Name: "x-history"}},
			Open: func(context.Context, *clickhouse.Client) ([]stream.Stage, func() error, error) { return nil, nil, nil }}},
	}
	if err := good.Validate("x"); err != nil {
		t.Fatalf("Validate(good) = %v", err)
	}
	if got := flowtest.StageNames(good); strings.Join(got, ",") != "x-a,x-history" {
		t.Errorf("StageNames = %v", got)
	}
	tests := []struct {
		name string
		edit func(d *flow.Description)
		want string
	}{
		{"unprefixed stage", func(d *flow.Description) { d.Stages[0].Name = "a" }, `want the prefix "x-"`},
		{"stage named twice", func(d *flow.Description) { d.Services[0].Name = "x-a" }, "named twice"},
		{"history group named like a stage", func(d *flow.Description) { d.History[0].Groups[0].Name = "x-a" }, "named twice"},
		{"edge from nowhere", func(d *flow.Description) { d.Edges[0].From = "x-ghost" }, "no stage, service"},
		{"bad topic", func(d *flow.Description) { d.Stages[0].Topic = stream.Topic{} }, "topic flow"},
		{"service without run", func(d *flow.Description) { d.Services[0].Run = nil }, "has no Run"},
		{"history without open", func(d *flow.Description) { d.History[0].Open = nil }, "needs Open"},
		{"waiter without run", func(d *flow.Description) { d.Waiters = []flow.Service{{Name: "w"}} }, "waiter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := good
			d.Stages = append([]stream.Stage(nil), good.Stages...)
			d.Services = append([]flow.Service(nil), good.Services...)
			d.Edges = append([]flow.Edge(nil), good.Edges...)
			d.History = []flow.History{good.History[0]}
			d.History[0].Groups = append([]flow.Group(nil), good.History[0].Groups...)
			tt.edit(&d)
			if err := d.Validate("x"); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestReadVars_defaultsKindsAndSecrets(t *testing.T) {
	vars := []flow.Var{
		{Name: "D", Kind: flow.Duration, Default: "30s"},
		{Name: "N", Kind: flow.Int},
		{Name: "U", Kind: flow.URL},
		{Name: "S", Secret: true, Kind: flow.Int},
		{Name: "T"},
		{Name: "B", Kind: flow.Bool},
		{Name: "F", Kind: flow.Bool, Default: "false"},
	}
	env := map[string]string{"N": " 7 ", "U": "https://example.org/base/", "T": "text", "B": "true"}
	lookup := func(n string) (string, bool) { v, ok := env[n]; return v, ok }
	values, err := flow.ReadVars(vars, lookup)
	if err != nil {
		t.Fatal(err)
	}
	s := flow.Settings{}.WithVars(values)
	if s.Duration("D") != 30*time.Second || s.Int("N") != 7 || s.String("U") != "https://example.org/base" || s.String("T") != "text" || s.Int("S") != 0 ||
		!s.Bool("B") || s.Bool("F") {
		t.Errorf("settings = D %v N %d U %q T %q S %d B %v F %v", s.Duration("D"), s.Int("N"), s.String("U"), s.String("T"), s.Int("S"), s.Bool("B"), s.Bool("F"))
	}
	bad := map[string]string{"D": "-1s", "N": "zero", "U": "ftp://x", "S": "hunter2", "B": "yes please"}
	_, err = flow.ReadVars(vars, func(n string) (string, bool) { v, ok := bad[n]; return v, ok })
	if err == nil {
		t.Fatal("ReadVars with bad values: no error")
	}
	for _, want := range []string{"D=", "N=", "U=", "S=", "B="} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error %q shows a secret value", err)
	}
	if _, err := flow.ReadVars([]flow.Var{{Name: "A"}, {Name: "A", Kind: flow.Int}}, lookup); err == nil {
		t.Error("a variable declared twice with different meanings: no error")
	}
}

func TestPublicURLFor_apiAddress(t *testing.T) {
	for addr, want := range map[string]string{"": flow.DefaultPublicURL, ":8080": "http://localhost:8080",
		":9000": "http://localhost:9000", "10.0.0.1:80": "http://10.0.0.1:80"} {
		if got := flow.PublicURLFor(addr); got != want {
			t.Errorf("PublicURLFor(%q) = %q, want %q", addr, got, want)
		}
	}
}

func TestDefine_routesGetTheBuiltFlowAndFindFindsIt(t *testing.T) {
	built := &fakeFlow{}
	var routed *fakeFlow
	def := flow.Define("x", func(context.Context, flow.Deps) (*fakeFlow, error) { return built, nil },
		func(_ *api.Server, f *fakeFlow) { routed = f })
	f, err := def.Build(context.Background(), flow.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	def.Routes(nil, f)
	if routed != built {
		t.Errorf("routes got %p, want the built flow %p", routed, built)
	}
	lookup := func(n string) (flow.Flow, bool) { return f, n == "x" }
	if got, err := flow.Find[*fakeFlow](lookup, "x"); err != nil || got != built {
		t.Errorf("Find = %v, %v", got, err)
	}
	if _, err := flow.Find[*fakeFlow](lookup, "y"); !errors.Is(err, flow.ErrNotBuilt) {
		t.Errorf("Find(unknown) = %v, want ErrNotBuilt", err)
	}
	failing := flow.Define("z", func(context.Context, flow.Deps) (*fakeFlow, error) { return nil, errors.New("boom") }, nil)
	if _, err := failing.Build(context.Background(), flow.Deps{}); err == nil || !strings.HasPrefix(err.Error(), "z: ") {
		t.Errorf("Build error = %v, want it prefixed with the flow's name", err)
	}
	if failing.Routes != nil {
		t.Error("a flow without routes has Routes")
	}
}

func TestValidate_definitions(t *testing.T) {
	build := func(context.Context, flow.Deps) (*fakeFlow, error) { return &fakeFlow{}, nil }
	b := flow.Bench{Name: "b", Bind: nil}
	tests := []struct {
		name string
		defs []flow.Definition
		ok   bool
	}{
		{"distinct", []flow.Definition{flow.Define("a", build, nil), flow.Define("b", build, nil)}, true},
		{"twice", []flow.Definition{flow.Define("a", build, nil), flow.Define("a", build, nil)}, false},
		{"bench without bind", []flow.Definition{flow.Define("a", build, nil).WithBench(b)}, false},
		{"conflicting vars", []flow.Definition{flow.Define("a", build, nil).WithVars(flow.Var{Name: "V"}),
			flow.Define("b", build, nil).WithVars(flow.Var{Name: "V", Kind: flow.Int})}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := flow.Validate(tt.defs); (err == nil) != tt.ok {
				t.Errorf("Validate = %v, want ok %v", err, tt.ok)
			}
		})
	}
}

func TestGraph_mermaidDrawsStagesTopicsAndHistory(t *testing.T) {
	raw, out := stream.NewTopic("x", "raw", 1), stream.NewTopic("x", "out", 1)
	d := flow.Description{
		Stages:   []stream.Stage{{Name: "x-work", Topic: raw}},
		Services: []flow.Service{{Name: "x-poll", Run: noop}},
		Edges:    []flow.Edge{{From: "x-poll", Topic: raw}, {From: "x-work", Topic: out}, {From: flow.FromAPI, Topic: raw}},
		History:  []flow.History{{Tables: []string{"events"}, Groups: []flow.Group{{Topic: out, Name: "x-history"}}}},
	}
	m := flow.NewGraph([]string{"x"}, []flow.Description{d}).Mermaid()
	for _, want := range []string{"flowchart LR", "subgraph flow_x [x]", "stage_x_work[x-work]", "stage_x_poll[/x-poll/]",
		"topic_x_raw([x.raw])", "topic_x_raw --> stage_x_work", "stage_x_work --> topic_x_out", "stage_x_poll --> topic_x_raw",
		"api_x --> topic_x_raw", "topic_x_out --> stage_x_history", "stage_x_history --> clickhouse", "clickhouse[(ClickHouse)]"} {
		if !strings.Contains(m, want) {
			t.Errorf("Mermaid lacks %q:\n%s", want, m)
		}
	}
	if again := flow.NewGraph([]string{"x"}, []flow.Description{d}).Mermaid(); again != m {
		t.Error("Mermaid is not deterministic")
	}
}
