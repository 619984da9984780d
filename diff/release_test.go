package diff

import (
	"context"
	"testing"

	"github.com/dropstream/dropstream/avail"
)

// A notifying stable open tells the run before its raw open (the release
// came after it), with any k, on the script and the model alike; baseline
// opens and closes tell nothing.
func TestRelease_stableOpensBoundTheRelease(t *testing.T) {
	a, b := slot("v1", "19:00"), slot("v1", "19:30")
	ms := func(i int) int64 { return snapOf("s", i, 1).RunAt.UnixMilli() }
	tests := []struct {
		name string
		k    int
		runs [][]avail.Entity
		want []Result // by run
	}{
		{"k=1: at once", 1, [][]avail.Entity{{}, {a, b}, {a}},
			[]Result{{Applied: true}, {Applied: true, Opened: 2, StableOpened: 2, Notices: 2, ReleasedAfterMS: ms(0)},
				{Applied: true, Closed: 1, StableClosed: 1}}},
		{"k=2: on confirmation", 2, [][]avail.Entity{{}, {}, {a}, {a, b}, {a, b}},
			[]Result{{Applied: true}, {Applied: true}, {Applied: true, Opened: 1},
				{Applied: true, Opened: 1, StableOpened: 1, Notices: 1, ReleasedAfterMS: ms(1)},
				{Applied: true, StableOpened: 1, Notices: 1, ReleasedAfterMS: ms(2)}}},
		{"baseline: no notice", 1, [][]avail.Entity{{a}, {a, b}},
			[]Result{{Applied: true, Opened: 1, StableOpened: 1},
				{Applied: true, Opened: 1, StableOpened: 1, Notices: 1, ReleasedAfterMS: ms(0)}}},
	}
	for _, be := range backends() {
		for _, tt := range tests {
			t.Run(be.name+"/"+tt.name, func(t *testing.T) {
				rdb := be.client(t)
				topics := avail.NewTopics(1)
				m := NewModel()
				for i, ents := range tt.runs {
					snap := snapOf("s", i, tt.k, ents...)
					got, err := Apply(context.Background(), rdb, topics, snap, "")
					if err != nil {
						t.Fatal(err)
					}
					model, _, _ := m.Apply(snap, "")
					if got != tt.want[i] || model != tt.want[i] {
						t.Fatalf("run %d: script %+v, model %+v, want %+v", i, got, model, tt.want[i])
					}
				}
			})
		}
	}
}
