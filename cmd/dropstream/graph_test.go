package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// fedFromOutside are topics no stage, service or route of the binary
// publishes to: the sample flow's ticks come from its generator.
var fedFromOutside = map[string]bool{"sample.ticks": true}

// The architecture doc shows the binary's own graph, so it cannot drift
// from the flows' declarations.
func TestGraph_architectureDocShowsTheBinarysFlows(t *testing.T) {
	clearEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := dispatch(ctx, []string{"graph"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- graph:begin -->\n```mermaid\n", "```\n<!-- graph:end -->"
	_, rest, ok := strings.Cut(string(doc), begin)
	shown, _, ok2 := strings.Cut(rest, end)
	if !ok || !ok2 {
		t.Fatalf("docs/architecture.md has no %q … %q block", begin, end)
	}
	if shown != out.String() {
		t.Errorf("docs/architecture.md shows another graph than `dropstream graph`; paste its output between the markers.\nwant:\n%s", out.String())
	}
}

// Every topic a stage reads is published to by a stage, service or route
// of some flow: the flows declare their edges.
func TestGraph_everyConsumedTopicHasAPublisher(t *testing.T) {
	clearEnv(t)
	a, err := newApp(context.Background(), Config{Partitions: 2, LogFormat: "json", LogLevel: "error"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	g, err := a.graph(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	published := map[string]bool{}
	for _, f := range g.Flows {
		for _, e := range f.Edges {
			published[e.Topic] = true
		}
	}
	for _, f := range g.Flows {
		for _, s := range f.Stages {
			if !published[s.Topic] && !fedFromOutside[s.Topic] {
				t.Errorf("flow %s: stage %s reads %s, which no flow declares an edge to", f.Name, s.Name, s.Topic)
			}
		}
	}
}
