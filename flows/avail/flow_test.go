package avail_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"

	"github.com/dropstream/dropstream/flow"
	availflow "github.com/dropstream/dropstream/flows/avail"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/stream"
)

func newFlow(t *testing.T, vars map[string]string) *availflow.Flow {
	t.Helper()
	rdb := testenv.Dial(t, "redis://"+miniredis.RunT(t).Addr())
	deps := flow.Deps{Redis: rdb, Publisher: stream.NewPublisher(rdb, stream.Telemetry{}), Settings: flow.Settings{Partitions: 2}.WithVars(vars)}
	nf, err := notifier.New(context.Background(), deps)
	if err != nil {
		t.Fatal(err)
	}
	deps.Flows = func(name string) (flow.Flow, bool) { return nf, name == notifier.Name }
	f, err := availflow.New(context.Background(), deps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// The flow declares its four stages, the collector service, the edges of
// what it publishes and the ClickHouse appends, under its stage names.
func TestFlow_describe(t *testing.T) {
	f := newFlow(t, nil)
	d := f.Describe()
	if err := d.Validate(availflow.Name); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	var stages []string
	for _, s := range d.Stages {
		stages = append(stages, s.Name)
	}
	if want := []string{"avail-normalizer", "avail-diff", "avail-projection", "avail-notifier"}; !slices.Equal(stages, want) {
		t.Errorf("stages %v, want %v", stages, want)
	}
	if len(d.Services) != 1 || d.Services[0].Name != "avail-collector" || availflow.StageCollector != "avail-collector" {
		t.Errorf("services %+v, want avail-collector", d.Services)
	}
	topics := f.Topics()
	if topics != availflow.NewTopics(2) || topics.Transitions.Partitions != 2 {
		t.Errorf("topics %+v", topics)
	}
	if len(d.Edges) != 4 || len(d.History) != 2 || len(d.History[0].Groups) != 2 || d.Demo == nil ||
		!slices.Equal(d.History[1].Tables, []string{"source_health"}) || d.History[1].Groups[0].Name != availflow.StageHealthHistory {
		t.Errorf("edges %+v, history %+v", d.Edges, d.History)
	}
	if f.ClickHouse() != nil {
		t.Error("ClickHouse without one configured")
	}
}

// LoadSources creates the sources of a file, and replaces them when loaded
// again.
func TestFlow_loadSources(t *testing.T) {
	f := newFlow(t, nil)
	path := filepath.Join(t.TempDir(), "sources.json")
	body := `[{"id":"resy-nyc","provider":"resy","base_url":"https://api.example.test","interval":"90s",
		"scopes":[{"venue":"1505","date":"2026-12-01","party_size":2}]}]`
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 2 {
		if err := f.LoadSources(ctx, path); err != nil {
			t.Fatalf("LoadSources: %v", err)
		}
	}
	srcs, err := f.Sources().List(ctx)
	if err != nil || len(srcs) != 1 || srcs[0].ID != "resy-nyc" {
		t.Errorf("sources %+v, %v; want resy-nyc once", srcs, err)
	}
	if err := f.LoadSources(ctx, filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("LoadSources of a missing file succeeded")
	}
}

// The watcher stage sends on the notifier flow's channels: the flow
// refuses to be built without it, naming it.
func TestNew_needsTheNotifierFlow(t *testing.T) {
	rdb := testenv.Dial(t, "redis://"+miniredis.RunT(t).Addr())
	_, err := availflow.New(context.Background(), flow.Deps{Redis: rdb, Publisher: stream.NewPublisher(rdb, stream.Telemetry{}),
		Settings: flow.Settings{Partitions: 2}})
	if !errors.Is(err, flow.ErrNotBuilt) || !strings.Contains(err.Error(), `"notifier"`) {
		t.Errorf("New without the notifier flow = %v, want ErrNotBuilt naming the notifier", err)
	}
}
