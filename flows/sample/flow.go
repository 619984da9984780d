package sample

import (
	"context"

	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/stream"
)

// The flow's stages.
const (
	StageEnrich = "sample-enrich" // turns each tick into a reading.
	StageSink   = "sample-sink"   // counts readings per sensor, once per tick.
)

// Flow is the sample flow, built over the app's Redis.
type Flow struct {
	topics Topics
	stages []stream.Stage
}

// New builds the flow; it implements flow.Flow.
func New(_ context.Context, d flow.Deps) (*Flow, error) {
	topics := NewTopics(d.Settings.Partitions)
	st, err := stages(d.Redis, d.Publisher, topics)
	if err != nil {
		return nil, err
	}
	return &Flow{topics: topics, stages: st}, nil
}

// Topics are the flow's topics.
func (f *Flow) Topics() Topics { return f.topics }

// Describe declares the two stages and the edge between them: sample-enrich
// publishes readings. Ticks come from Generate, outside the flow's stages.
func (f *Flow) Describe() flow.Description {
	return flow.Description{
		Stages: f.stages,
		Edges:  []flow.Edge{{From: StageEnrich, Topic: f.topics.Readings}},
	}
}

// Close releases nothing: the flow holds only what the app gave it.
func (f *Flow) Close() error { return nil }
