package flow

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Graph is the shape of a set of flows: what each stage, service and the
// API publish to, and what each topic feeds. The console and the docs draw
// it; it is derived from the flows' Descriptions alone.
type Graph struct {
	Flows []GraphFlow `json:"flows"`
}

// GraphFlow is one flow of a Graph.
type GraphFlow struct {
	Name string `json:"name"`
	// Stages are the stages and the history stages, with the topic each
	// reads; Services the services.
	Stages   []GraphStage `json:"stages"`
	Services []string     `json:"services,omitempty"`
	// Edges are the flow's publishes: From (stage, service or "api") to
	// Topic ("flow.name").
	Edges []GraphEdge `json:"edges,omitempty"`
	// Tables are the ClickHouse tables of its history.
	Tables []string `json:"tables,omitempty"`
}

// GraphStage is a stage and the topic it consumes.
type GraphStage struct {
	Name  string `json:"name"`
	Topic string `json:"topic"`
	// History says the stage appends to ClickHouse.
	History bool `json:"history,omitempty"`
}

// GraphEdge is a publish.
type GraphEdge struct {
	From  string `json:"from"`
	Topic string `json:"topic"`
}

// NewGraph builds the graph of the named descriptions, in their order,
// each flow's parts sorted by name.
func NewGraph(names []string, descs []Description) Graph {
	var g Graph
	for i, d := range descs {
		gf := GraphFlow{Name: names[i]}
		for _, s := range d.Stages {
			gf.Stages = append(gf.Stages, GraphStage{Name: s.Name, Topic: s.Topic.String()})
		}
		for _, h := range d.History {
			for _, grp := range h.Groups {
				gf.Stages = append(gf.Stages, GraphStage{Name: grp.Name, Topic: grp.Topic.String(), History: true})
			}
			gf.Tables = append(gf.Tables, h.Tables...)
		}
		for _, s := range d.Services {
			gf.Services = append(gf.Services, s.Name)
		}
		for _, e := range d.Edges {
			gf.Edges = append(gf.Edges, GraphEdge{From: e.From, Topic: e.Topic.String()})
		}
		slices.SortFunc(gf.Stages, func(a, b GraphStage) int { return strings.Compare(a.Name, b.Name) })
		slices.Sort(gf.Services)
		slices.Sort(gf.Tables)
		gf.Tables = slices.Compact(gf.Tables)
		slices.SortFunc(gf.Edges, func(a, b GraphEdge) int {
			return strings.Compare(a.From+" "+a.Topic, b.From+" "+b.Topic)
		})
		g.Flows = append(g.Flows, gf)
	}
	return g
}

// Mermaid draws the graph as a Mermaid flowchart: a subgraph per flow,
// stages and services as boxes, topics as rounded nodes, ClickHouse as a
// database node.
func (g Graph) Mermaid() string {
	var b strings.Builder
	b.WriteString("flowchart LR\n")
	id := func(kind, name string) string {
		r := strings.NewReplacer(".", "_", "-", "_", " ", "_")
		return kind + "_" + r.Replace(name)
	}
	topics := map[string]bool{}
	var links []string
	history := false
	for _, f := range g.Flows {
		fmt.Fprintf(&b, "  subgraph %s [%s]\n", id("flow", f.Name), f.Name)
		for _, s := range f.Stages {
			fmt.Fprintf(&b, "    %s[%s]\n", id("stage", s.Name), s.Name)
			topics[s.Topic] = true
			links = append(links, fmt.Sprintf("  %s --> %s", id("topic", s.Topic), id("stage", s.Name)))
			if s.History {
				history = true
				links = append(links, fmt.Sprintf("  %s --> clickhouse", id("stage", s.Name)))
			}
		}
		for _, s := range f.Services {
			fmt.Fprintf(&b, "    %s[/%s/]\n", id("stage", s), s)
		}
		for _, e := range f.Edges {
			topics[e.Topic] = true
			from := id("stage", e.From)
			if e.From == FromAPI {
				from = id("api", f.Name)
				fmt.Fprintf(&b, "    %s>%s API]\n", from, f.Name)
			}
			links = append(links, fmt.Sprintf("  %s --> %s", from, id("topic", e.Topic)))
		}
		b.WriteString("  end\n")
	}
	for _, t := range slices.Sorted(maps.Keys(topics)) {
		fmt.Fprintf(&b, "  %s([%s])\n", id("topic", t), t)
	}
	if history {
		b.WriteString("  clickhouse[(ClickHouse)]\n")
	}
	for _, l := range slices.Compact(slices.Sorted(slices.Values(links))) {
		b.WriteString(l + "\n")
	}
	return b.String()
}
