package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/flows/sample"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// dlqCLI runs "dlq <verb> --redis-url url --partitions 2 args..." to the end.
func dlqCLI(t *testing.T, url, verb string, args ...string) (string, error) {
	t.Helper()
	out, _, err := dlqCLIWithStderr(t, url, verb, args...)
	return out, err
}

// dlqCLIWithStderr is dlqCLI that also returns what went to stderr.
func dlqCLIWithStderr(t *testing.T, url, verb string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var outBuf, errBuf bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	all := append([]string{"dlq", verb, "--redis-url", url, "--partitions", "2"}, args...)
	err = dispatch(ctx, all, &outBuf, &errBuf)
	return outBuf.String(), errBuf.String(), err
}

// deadLetter runs the sample-enrich stage until the ticks topic holds want
// dead letters, and stops it.
func deadLetter(t *testing.T, url string, rdb redis.UniversalClient, ticks stream.Topic, want int64) {
	t.Helper()
	run := startDispatch(t, "run", "--redis-url", url, "--api-addr", "", "--partitions", "2", "--stages", "sample-enrich")
	dlq := stream.NewDeadLetters(rdb)
	run.waitFor(t, 30*time.Second, func() bool {
		n, err := dlq.Count(context.Background(), ticks)
		return err == nil && n == want
	}, "dead letters of sample.ticks")
	if !drained(t, rdb, ticks, "sample-enrich") {
		t.Errorf("dead-lettered messages still pending in sample-enrich's group")
	}
	if err := run.stop(t); err != nil {
		t.Fatalf("run returned %v, want nil\nstderr:\n%s", err, run.stderr)
	}
}

func publishRaw(t *testing.T, rdb redis.UniversalClient, topic stream.Topic, key, payload string) *stream.Message {
	t.Helper()
	m := stream.NewMessage(key, "sample.tick", []byte(payload))
	if err := stream.NewPublisher(rdb, stream.Telemetry{}).Publish(context.Background(), topic, m); err != nil {
		t.Fatal(err)
	}
	return m
}

// keyInPartition returns a key that ticks routes to partition p.
func keyInPartition(t *testing.T, topic stream.Topic, p int) string {
	t.Helper()
	for i := 0; i < 1000; i++ {
		if k := "key-" + strconv.Itoa(i); topic.Partition(k) == p {
			return k
		}
	}
	t.Fatalf("no key for partition %d", p)
	return ""
}

func listDeadLetters(t *testing.T, url, topic string) []deadLetterOut {
	t.Helper()
	out, err := dlqCLI(t, url, "list", "--topic", topic)
	if err != nil {
		t.Fatalf("dlq list --topic %s: %v", topic, err)
	}
	var list []deadLetterOut
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var dl deadLetterOut
		if err := json.Unmarshal([]byte(line), &dl); err != nil {
			t.Fatalf("dlq list printed a line that is not JSON: %q: %v", line, err)
		}
		list = append(list, dl)
	}
	return list
}

func TestDLQ_listReplayPurgeWithRealRedis(t *testing.T) {
	clearEnv(t)
	url := testenv.RedisURL(t)
	rdb := redisClient(t, url)
	ctx := context.Background()
	sampleTopics := sample.NewTopics(2)
	ticks, _ := sampleTopics.Ticks, sampleTopics.Readings
	dlq := stream.NewDeadLetters(rdb)

	bad := publishRaw(t, rdb, ticks, "bad-key", "not json")
	deadLetter(t, url, rdb, ticks, 1)

	list := listDeadLetters(t, url, "sample.ticks")
	if len(list) != 1 {
		t.Fatalf("dlq list printed %d dead letters, want 1: %+v", len(list), list)
	}
	dl := list[0]
	if dl.Stage != "sample-enrich" || dl.Group != "sample-enrich" || dl.Attempts != 1 || !strings.Contains(dl.Reason, "decode") {
		t.Errorf("dead letter = %+v, want stage and group sample-enrich, attempts 1 and a decode reason", dl)
	}
	if dl.Payload != "not json" || dl.Key != "bad-key" || dl.Type != "sample.tick" || dl.Partition != bad.Partition || dl.OriginID != bad.ID {
		t.Errorf("dead letter = %+v, want the original message %s of partition %d", dl, bad.ID, bad.Partition)
	}
	if _, err := time.Parse("2006-01-02T15:04:05.000Z07:00", dl.At); err != nil {
		t.Errorf("dead letter time %q: %v", dl.At, err)
	}
	if empty := listDeadLetters(t, url, "sample.readings"); len(empty) != 0 {
		t.Errorf("sample.readings has dead letters: %+v", empty)
	}

	if out, err := dlqCLI(t, url, "purge", "--topic", "sample.ticks"); err == nil || !strings.Contains(err.Error(), "purge needs refs or --all") {
		t.Errorf("dlq purge without refs = %q, %v; want a 'purge needs refs or --all' error", out, err)
	}
	if n, _ := dlq.Count(ctx, ticks); n != 1 {
		t.Fatalf("purge without ids left %d dead letters, want 1", n)
	}
	if out, err := dlqCLI(t, url, "replay", "--topic", "sample.ticks", "0/0-1"); err == nil || !strings.Contains(err.Error(), "not found") || out != "replayed 0\n" {
		t.Errorf("dlq replay of a missing id = %q, %v; want replayed 0 and a not found error", out, err)
	}

	before := rdb.XLen(ctx, ticks.Stream(bad.Partition)).Val()
	out, progressOut, err := dlqCLIWithStderr(t, url, "replay", "--topic", "sample.ticks")
	if err != nil || out != "replayed 1\n" {
		t.Fatalf("dlq replay = %q, %v; want \"replayed 1\"", out, err)
	}
	// stderr is not a terminal: the phase's start and end lines.
	var phase []string
	for l := range strings.Lines(progressOut) {
		if strings.HasPrefix(l, "replay sample.ticks: ") {
			phase = append(phase, l)
		}
	}
	if len(phase) != 2 || phase[0] != "replay sample.ticks: started, 1 to do\n" || !strings.HasPrefix(phase[1], "replay sample.ticks: done, 1/1 in ") {
		t.Errorf("dlq replay progress %q, want its start and its end with 1/1", phase)
	}
	if after := rdb.XLen(ctx, ticks.Stream(bad.Partition)).Val(); after != before+1 {
		t.Errorf("stream length %d after replay, want %d", after, before+1)
	}
	if n, _ := dlq.Count(ctx, ticks); n != 0 {
		t.Errorf("%d dead letters after replay, want 0", n)
	}

	// The replayed message fails again; with a second bad one in the same
	// partition there are two. (Dead letters of different partitions may
	// share an ID: see TestDLQ_purgeByIDRemovesOnlyThatDeadLetter.)
	publishRaw(t, rdb, ticks, keyInPartition(t, ticks, bad.Partition), "{")
	deadLetter(t, url, rdb, ticks, 2)
	list = listDeadLetters(t, url, "sample.ticks")
	if len(list) != 2 {
		t.Fatalf("dlq list printed %d dead letters, want 2: %+v", len(list), list)
	}
	out, err = dlqCLI(t, url, "purge", "--topic", "sample.ticks", list[0].Ref)
	if err != nil || out != "purged 1\n" {
		t.Fatalf("dlq purge %s = %q, %v; want \"purged 1\"", list[0].Ref, out, err)
	}
	out, err = dlqCLI(t, url, "purge", "--topic", "sample.ticks", "--all")
	if err != nil || out != "purged 1\n" {
		t.Fatalf("dlq purge --all = %q, %v; want \"purged 1\"", out, err)
	}
	if n, _ := dlq.Count(ctx, ticks); n != 0 {
		t.Errorf("%d dead letters after purge --all, want 0", n)
	}
}

func TestDLQ_badArgumentsFail(t *testing.T) {
	clearEnv(t)
	url := testenv.RedisURL(t)
	tests := []struct {
		name string
		verb string
		args []string
		want []string
	}{
		{"unknown topic", "list", []string{"--topic", "nope"}, []string{`--topic "nope"`, "sample.readings, sample.ticks"}},
		{"missing topic", "purge", []string{"--all"}, []string{`--topic ""`, "sample.readings, sample.ticks"}},
		{"limit out of range", "list", []string{"--topic", "sample.ticks", "--limit", "0"}, []string{"--limit 0 out of range"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := dlqCLI(t, url, tt.verb, tt.args...)
			if err == nil {
				t.Fatalf("dlq %s %q = %q, nil; want an error", tt.verb, tt.args, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("dlq %s %q error %q lacks %q", tt.verb, tt.args, err, w)
				}
			}
		})
	}
	var stdout, stderr bytes.Buffer
	if err := dispatch(context.Background(), []string{"dlq"}, &stdout, &stderr); err == nil {
		t.Errorf("dlq without a verb = nil, want an error")
	}
}

// Dead-letter streams are per partition, and Redis gives entries added to
// different streams in the same millisecond the same ID ("<ms>-0"), which
// happens whenever a stage dead-letters messages of several partitions in
// one burst. dlq list prints such IDs side by side; purging one of them must
// not delete the other partition's dead letter.
//
// The entries are written by hand with the same explicit ID to make the
// collision deterministic; their fields are those of stream.Runner's
// dead-letter entries (stream/deadletter.go).
func TestDLQ_purgeByIDRemovesOnlyThatDeadLetter(t *testing.T) {
	clearEnv(t)
	url := testenv.RedisURL(t)
	rdb := redisClient(t, url)
	ctx := context.Background()
	sampleTopics := sample.NewTopics(2)
	ticks, _ := sampleTopics.Ticks, sampleTopics.Readings
	const id = "1700000000000-0"
	for p := 0; p < 2; p++ {
		err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: ticks.DeadLetterStream(p), ID: id, Values: []any{
			"key", "key-" + strconv.Itoa(p), "type", "sample.tick", "payload", "not json " + strconv.Itoa(p),
			"dlq.reason", "permanent: decode tick: invalid character", "dlq.stage", "sample-enrich",
			"dlq.group", "sample-enrich", "dlq.attempts", "1", "dlq.origin_id", "1699999999999-" + strconv.Itoa(p),
			"dlq.at", "2023-11-14T22:13:20Z",
		}}).Err()
		if err != nil {
			t.Fatal(err)
		}
	}
	list := listDeadLetters(t, url, "sample.ticks")
	if len(list) != 2 || list[0].ID != id || list[1].ID != id || list[0].Partition == list[1].Partition {
		t.Fatalf("dlq list = %+v, want two dead letters of partitions 0 and 1 with ID %s", list, id)
	}
	out, err := dlqCLI(t, url, "purge", "--topic", "sample.ticks", list[0].Ref)
	if err != nil {
		t.Fatalf("dlq purge %s: %v", list[0].Ref, err)
	}
	n, err := stream.NewDeadLetters(rdb).Count(ctx, ticks)
	if err != nil {
		t.Fatal(err)
	}
	if out != "purged 1\n" || n != 1 {
		t.Errorf("dlq purge of one listed ID printed %q and left %d dead letters; want \"purged 1\" and the other "+
			"partition's dead letter kept (an ID alone does not identify a dead letter of a partitioned topic)", out, n)
	}
}
