package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/dropstream/dropstream/api/stageadmin"
	"github.com/dropstream/dropstream/internal/progress"
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

const dlqUsage = "Usage: dropstream dlq list|replay|purge --topic FLOW.NAME [flags] [refs...]\n\n" +
	"  list    prints dead letters as JSON lines (reason, stage, attempts, original message)\n" +
	"  replay  sends dead letters back to their stream as new messages (all, or the refs given)\n" +
	"  purge   deletes dead letters (the refs given, or all with --all)\n\n" +
	"A ref is partition/entry-id, as printed by list."

func runDLQ(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg Config
	var topicName string
	var limit int
	var all bool
	verb, fs, err := verbFlags("dlq", args, dlqUsage, "Administers dead-letter streams.", stderr, &cfg, func(fs *flags) {
		fs.StringVar(&topicName, "topic", "", "topic as flow.name (required)")
		fs.IntVar(&limit, "limit", 100, "list: at most this many")
		fs.BoolVar(&all, "all", false, "purge: every dead letter of the topic")
	}, "list", "replay", "purge")
	if verb == "" {
		return err
	}
	cfg.APIAddr = ""
	a, err := newApp(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	defer a.close()
	topics, err := a.topics()
	if err != nil {
		return err
	}
	var topic stream.Topic
	var names []string
	for _, t := range topics {
		names = append(names, t.String())
		if t.String() == topicName {
			topic = t
		}
	}
	if topic.Partitions == 0 {
		return fmt.Errorf("--topic %q: want one of %s", topicName, strings.Join(names, ", "))
	}
	dlq := stream.NewDeadLetters(a.rdb)
	ids := fs.Args()
	switch verb {
	case "list":
		if limit < 1 || limit > 100000 {
			return fmt.Errorf("--limit %d out of range 1..100000", limit)
		}
		list, err := dlq.List(ctx, topic, limit)
		if err != nil {
			return err
		}
		enc := json.NewEncoder(stdout)
		for _, dl := range list {
			_ = enc.Encode(deadLetterOut{Ref: dl.Ref(), ID: dl.ID, Partition: dl.Partition, OriginID: dl.OriginID, Stage: dl.Stage,
				Group: dl.Group, Attempts: dl.Attempts, Reason: dl.Reason, At: dl.At.Format("2006-01-02T15:04:05.000Z07:00"),
				Key: dl.Message.Key, Type: dl.Message.Type, Payload: string(dl.Message.Payload),
				TraceParent: dl.Message.TraceParent, Metadata: dl.Message.Metadata})
		}
		return nil
	case "replay":
		total := int64(len(ids))
		if total == 0 {
			if total, err = dlq.Count(ctx, topic); err != nil {
				return err
			}
		}
		// A bar on a terminal, the start and end lines otherwise (stderr).
		phase := progress.New(stderr).Start("replay "+topic.String(), total)
		dlq.Progress = func(done int) { phase.Set(int64(done)) }
		n, err := dlq.Replay(ctx, topic, ids...)
		if err == nil {
			phase.Done("")
		}
		fmt.Fprintf(stdout, "replayed %d\n", n)
		return err
	default:
		if len(ids) == 0 && !all {
			return errors.New("purge needs refs or --all")
		}
		n, err := dlq.Purge(ctx, topic, ids...)
		fmt.Fprintf(stdout, "purged %d\n", n)
		return err
	}
}

type deadLetterOut struct {
	Ref       string `json:"ref"`
	ID        string `json:"id"`
	Partition int    `json:"partition"`
	OriginID  string `json:"origin_id"`
	Stage     string `json:"stage"`
	Group     string `json:"group"`
	Attempts  int    `json:"attempts"`
	Reason    string `json:"reason"`
	At        string `json:"at"`
	Key       string `json:"key"`
	Type      string `json:"type"`
	Payload   string `json:"payload"`
	// TraceParent is the W3C trace context the message carried: the trace
	// to open.
	TraceParent string            `json:"traceparent,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
}
