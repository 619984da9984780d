package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/api/stageadmin"
	"github.com/dropstream/dropstream/stream"
)

const stageUsage = "Usage: dropstream stage list|pause|resume [flags] [stage]\n\n" +
	"  list    prints every stage as a JSON line: stage, stream, group, partitions, paused\n" +
	"  pause   pauses a stage in every process: each copy finishes its batch in hand and stops\n" +
	"          reading; its lag keeps being reported\n" +
	"  resume  resumes a paused stage: its copies read again within a second"

func runStage(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg Config
	verb, fs, err := verbFlags("stage", args, stageUsage, "Pauses, resumes and lists the stages.", stderr, &cfg, func(*flags) {},
		"list", "pause", "resume")
	if verb == "" {
		return err
	}
	if cfg.RedisURL == "" {
		return errors.New("stage needs --redis-url (DROPSTREAM_REDIS_URL): an embedded Redis holds no stage of another process")
	}
	cfg.APIAddr = ""
	a, err := newApp(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	defer a.close()
	stages, err := a.adminStages()
	if err != nil {
		return err
	}
	ctl := stream.NewControl(a.rdb)
	if verb == "list" {
		paused, err := ctl.Paused(ctx)
		if err != nil {
			return err
		}
		enc := json.NewEncoder(stdout)
		for _, s := range stages {
			_ = enc.Encode(stageadmin.StateOf(s, paused))
		}
		return nil
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("stage %s needs one stage name", verb)
	}
	name := fs.Arg(0)
	if !slices.ContainsFunc(stages, func(s stageadmin.Stage) bool { return s.Name == name }) {
		names := make([]string, 0, len(stages))
		for _, s := range stages {
			names = append(names, s.Name)
		}
		return fmt.Errorf("no stage %q: want one of %s", name, strings.Join(names, ", "))
	}
	if verb == "pause" {
		err = ctl.Pause(ctx, name)
	} else {
		err = ctl.Resume(ctx, name)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%sd %s\n", verb, name)
	return nil
}

// adminStages returns every stage the binary knows, by name, as the stage
// administration sees them.
func (a *app) adminStages() ([]stageadmin.Stage, error) {
	all, err := a.stages()
	if err != nil {
		return nil, err
	}
	out := make([]stageadmin.Stage, 0, len(all))
	for _, s := range all {
		out = append(out, stageadmin.Stage{Name: s.Name, Topic: s.Topic, Group: s.Config.WithDefaults(s.Name).Group})
	}
	slices.SortFunc(out, func(x, y stageadmin.Stage) int { return strings.Compare(x.Name, y.Name) })
	return out, nil
}

// registerStageAdmin adds the stage administration routes to srv.
func (a *app) registerStageAdmin(srv *api.Server) error {
	stages, err := a.adminStages()
	if err != nil {
		return err
	}
	stageadmin.Register(srv, stream.NewControl(a.rdb), stages)
	return nil
}
