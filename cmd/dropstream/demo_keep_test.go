package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"
)

func TestKeepDemo_startsAFailedDemoAgain(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var attempts []context.Context
	demo := func(ctx context.Context) error {
		attempts = append(attempts, ctx)
		if len(attempts) < 3 {
			return errors.New("recordstore: get: i/o timeout")
		}
		return nil
	}
	keepDemo(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), demo, time.Millisecond)
	if len(attempts) != 3 {
		t.Fatalf("%d attempts, want 3 (two failures, then a success)", len(attempts))
	}
	for i, a := range attempts[:2] {
		if a.Err() == nil {
			t.Errorf("failed attempt %d: its context was not cancelled", i+1)
		}
	}
	if attempts[2].Err() != nil {
		t.Error("the successful attempt's context was cancelled: its goroutines would stop")
	}
	cancel()
	<-attempts[2].Done() // ends with the demo's context
}

func TestKeepDemo_stopsWhenTheDemoEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	keepDemo(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), func(context.Context) error {
		n++
		cancel() // the demo is stopped while this attempt fails
		return errors.New("context canceled")
	}, time.Hour)
	if n != 1 {
		t.Errorf("%d attempts after the demo ended, want 1", n)
	}
}
