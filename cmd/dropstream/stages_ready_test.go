package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// TestStagesReady_failsNamingTheStageWhoseNameAnotherProcessHolds: two
// copies under one instance id (one DROPSTREAM_INSTANCE started twice):
// the process whose copy lost its consumer name fails the "stages" check
// naming the stage, and passes it again once the name is free.
func TestStagesReady_failsNamingTheStageWhoseNameAnotherProcessHolds(t *testing.T) {
	emb, err := stream.StartEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Close()
	rdb := testenv.Dial(t, emb.URL())
	stage := stream.Stage{Name: "sample-stage", Topic: stream.NewTopic("readyz", "events", 1),
		Config:  stream.RunnerConfig{Instance: "node-x", ConsumerLease: 300 * time.Millisecond, Block: 50 * time.Millisecond},
		Handler: func(context.Context, *stream.Message) error { return nil }}
	run := func() (*app, context.CancelFunc, chan error) {
		r, err := stream.NewRunner(rdb, stage, stream.Telemetry{})
		if err != nil {
			t.Fatal(err)
		}
		a := &app{}
		a.runners.Store(&[]*stream.Runner{r})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		<-r.Started()
		return a, cancel, done
	}
	first, stopFirst, firstDone := run()
	defer func() { stopFirst(); <-firstDone }()
	if err := first.stagesReady(context.Background()); err != nil {
		t.Fatalf("stages check with the name held = %v, want nil", err)
	}
	second, stopSecond, secondDone := run()
	testenv.WaitFor(t, 20*time.Second, func() bool { return first.stagesReady(context.Background()) != nil },
		"the first process's stages check never failed")
	if err := first.stagesReady(context.Background()); !strings.Contains(err.Error(), "sample-stage") {
		t.Errorf("stages check = %v, want it to name the stage", err)
	}
	if err := second.stagesReady(context.Background()); err != nil {
		t.Errorf("the later process's stages check = %v, want nil", err)
	}
	stopSecond()
	if err := <-secondDone; err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 20*time.Second, func() bool { return first.stagesReady(context.Background()) == nil },
		"the first process's stages check never passed again once the name was free")
	select {
	case err := <-firstDone:
		t.Fatalf("the first copy stopped: %v", err)
	default:
	}
}
