package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/stream"
)

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg Config
	var stages string
	var copies int
	var trimAge time.Duration
	fs := flagSet("run", "Runs stages, any number of copies at once in one or many processes, and the API.", stderr, &cfg, "json")
	var sourcesFile string
	envString(fs, &stages, "stages", "DROPSTREAM_STAGES", "all", "comma list of stages and services to run, all, or none (the API and its waiters only)")
	fs.StringVar(&sourcesFile, "sources-file", "", "JSON file of availability sources the avail-collector service creates or replaces at start [DROPSTREAM_SOURCES_FILE]")
	envInt(fs, &copies, "copies", "DROPSTREAM_COPIES", 1, "copies of each stage in this process")
	fs.DurationVar(&trimAge, "trim-min-age", time.Hour, "keep acknowledged stream entries at least this long before trimming")
	var listStages bool
	fs.BoolVar(&listStages, "list-stages", false, "print every stage and service --stages accepts, one JSON object a line, and exit")
	var claimIdle, handlerTimeout time.Duration
	fs.DurationVar(&claimIdle, "claim-idle", 0, "override every stage's ClaimIdle: how long an unacknowledged message waits before another copy takes it (0: each stage's default)")
	fs.DurationVar(&handlerTimeout, "handler-timeout", 0, "override every stage's handler timeout (0: each stage's default)")
	if err := fs.parse(args); err != nil {
		return err
	}
	if copies < 1 || copies > 64 {
		return fmt.Errorf("copies %d out of range 1..64", copies)
	}
	var overrides map[string]string
	if sourcesFile != "" {
		overrides = map[string]string{"DROPSTREAM_SOURCES_FILE": sourcesFile}
	}
	cfg.Role = roleOf(stages)
	a, err := newAppWith(ctx, cfg, overrides, stderr)
	if err != nil {
		return err
	}
	defer a.close()
	all, err := a.stages()
	if err != nil {
		return err
	}
	if listStages {
		return printStages(stdout, all, a.services())
	}
	chosen, services, err := pick(all, a.services(), stages)
	if err != nil {
		return err
	}
	for i := range chosen {
		if claimIdle > 0 {
			chosen[i].Config.ClaimIdle = claimIdle
			chosen[i].Config.ClaimInterval = max(100*time.Millisecond, claimIdle/4)
		}
		if handlerTimeout > 0 {
			chosen[i].Config.HandlerTimeout = handlerTimeout
		}
	}
	var srv *api.Server
	if cfg.APIAddr != "" {
		// Built before anything starts: a route that cannot be registered
		// stops the process at once.
		if srv, err = a.apiServer(); err != nil {
			return err
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	_, failed, err := a.start(ctx, &wg, startOptions{stages: chosen, services: services, copies: copies, trimAge: trimAge})
	if err != nil {
		return err
	}
	if srv != nil {
		a.log.Info("api listening", "addr", cfg.APIAddr)
		a.serve(ctx, &wg, srv, failed)
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-failed:
		return err
	}
}

// listedStage is one line of `run --list-stages`: a stage with the streams
// and consumer group it reads, or a service (a loop beside the stages).
type listedStage struct {
	Name string `json:"name"`
	// Kind is "stage" or "service".
	Kind string `json:"kind"`
	// Flow, Topic and Partitions name a stage's streams (stream.Topic);
	// Group is its consumer group.
	Flow       string `json:"flow,omitempty"`
	Topic      string `json:"topic,omitempty"`
	Partitions int    `json:"partitions,omitempty"`
	Group      string `json:"group,omitempty"`
}

// printStages writes the stages, then the services, each sorted by name.
func printStages(w io.Writer, stages map[string]stream.Stage, services map[string]func(context.Context) error) error {
	enc := json.NewEncoder(w)
	for _, n := range slices.Sorted(maps.Keys(stages)) {
		s := stages[n]
		if err := enc.Encode(listedStage{Name: n, Kind: "stage", Flow: s.Topic.Flow, Topic: s.Topic.Name,
			Partitions: s.Topic.Partitions, Group: cmp.Or(s.Config.Group, s.Name)}); err != nil {
			return err
		}
	}
	for _, n := range slices.Sorted(maps.Keys(services)) {
		if err := enc.Encode(listedStage{Name: n, Kind: "service"}); err != nil {
			return err
		}
	}
	return nil
}
