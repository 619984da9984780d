package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/api/stageadmin"
	"github.com/dropstream/dropstream/flows/sample"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// stageCLI runs "stage <verb> --redis-url url --partitions 2 args..." to the end.
func stageCLI(t *testing.T, url, verb string, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	all := append([]string{"stage", verb, "--redis-url", url, "--partitions", "2"}, args...)
	err := dispatch(ctx, all, &stdout, &stderr)
	return stdout.String(), err
}

// groupLag sums a group's lag over a topic's streams.
func groupLag(t *testing.T, rdb redis.UniversalClient, topic stream.Topic, group string) int64 {
	t.Helper()
	var n int64
	for p := 0; p < topic.Partitions; p++ {
		groups, _ := rdb.XInfoGroups(context.Background(), topic.Stream(p)).Result()
		for _, g := range groups {
			if g.Name == group {
				n += g.Lag
			}
		}
	}
	return n
}

// TestStage_pauseStopsEveryProcessUntilResumed pauses the sample-enrich
// stage run by two processes: neither handles the ticks published while
// it is paused (they wait as lag), and after the resume every tick gives
// exactly one reading.
func TestStage_pauseStopsEveryProcessUntilResumed(t *testing.T) {
	clearEnv(t)
	url := testenv.RedisURL(t)
	rdb := redisClient(t, url)
	topics := sample.NewTopics(2)
	runs := []*background{
		startDispatch(t, "run", "--redis-url", url, "--api-addr", "", "--partitions", "2", "--stages", "sample-enrich"),
		startDispatch(t, "run", "--redis-url", url, "--api-addr", "", "--partitions", "2", "--stages", "sample-enrich"),
	}
	const before, during = 20, 30
	publishTicks(t, rdb, 2, before)
	runs[0].waitFor(t, 30*time.Second, func() bool { return streamLen(t, rdb, topics.Readings) == before }, "readings of the first ticks")

	if out, err := stageCLI(t, url, "pause", "sample-enrich"); err != nil || out != "paused sample-enrich\n" {
		t.Fatalf("stage pause = %q, %v", out, err)
	}
	for i, r := range runs {
		r.waitFor(t, 30*time.Second, func() bool {
			return strings.Contains(r.stderr.String(), "stage paused: every partition stopped reading")
		}, "process "+string(rune('A'+i))+" paused")
	}
	publishTicks(t, rdb, 2, during)
	runs[0].waitFor(t, 30*time.Second, func() bool { return groupLag(t, rdb, topics.Ticks, "sample-enrich") == during },
		"the ticks published during the pause waiting as lag")
	if got := streamLen(t, rdb, topics.Readings); got != before {
		t.Fatalf("a paused stage made %d readings, want %d", got, before)
	}

	out, err := stageCLI(t, url, "list")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for line := range strings.Lines(out) {
		var s stageadmin.StageOut
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatalf("stage list printed %q: %v", line, err)
		}
		if s.Stage == "sample-enrich" {
			found = s.Paused && s.PausedAt != "" && s.Stream == "sample.ticks"
		} else if s.Paused {
			t.Errorf("stage %s listed as paused", s.Stage)
		}
	}
	if !found {
		t.Errorf("stage list does not show sample-enrich paused:\n%s", out)
	}

	if out, err := stageCLI(t, url, "resume", "sample-enrich"); err != nil || out != "resumed sample-enrich\n" {
		t.Fatalf("stage resume = %q, %v", out, err)
	}
	runs[0].waitFor(t, 30*time.Second, func() bool {
		return drained(t, rdb, topics.Ticks, "sample-enrich") && streamLen(t, rdb, topics.Readings) >= before+during
	}, "every tick handled after the resume")
	if got := streamLen(t, rdb, topics.Readings); got != before+during {
		t.Errorf("%d readings for %d ticks: a tick was lost or handled twice", got, before+during)
	}
}

func TestStage_refusals(t *testing.T) {
	clearEnv(t)
	url := testenv.RedisURL(t)
	for _, tc := range []struct {
		verb string
		args []string
		want string
	}{
		{"pause", []string{"no-such-stage"}, `no stage "no-such-stage"`},
		{"resume", nil, "needs one stage name"},
		{"show", nil, "stage needs list, pause or resume"},
	} {
		if _, err := stageCLI(t, url, tc.verb, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("stage %s %v = %v, want an error with %q", tc.verb, tc.args, err, tc.want)
		}
	}
}

// TestRun_redisDownAnswers503 stops the Redis of a running `run`: the
// stage routes answer 503 "unavailable" with Retry-After, /readyz says
// unready, and both recover once Redis is back.
func TestRun_redisDownAnswers503(t *testing.T) {
	clearEnv(t)
	srv := testenv.StartRedis(t, testenv.RedisConfig{})
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	base := "http://" + addr
	run := startDispatch(t, "run", "--redis-url", srv.URL(), "--api-addr", addr, "--partitions", "2", "--stages", "sample-enrich")
	run.waitFor(t, 30*time.Second, func() bool { status, _ := get(t, base+"/v1/admin/stages"); return status == http.StatusOK },
		"the stage routes")

	srv.Stop()
	res, err := http.Get(base + "/v1/admin/stages")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	var env struct {
		Error struct{ Code, Message string }
	}
	if res.StatusCode != http.StatusServiceUnavailable || json.Unmarshal(body, &env) != nil || env.Error.Code != "unavailable" ||
		res.Header.Get("Retry-After") == "" || strings.Contains(string(body), "refused") {
		t.Errorf("with Redis down: %d %s (Retry-After %q); want 503 unavailable with Retry-After and no connection error",
			res.StatusCode, body, res.Header.Get("Retry-After"))
	}
	if status, body := get(t, base+"/readyz"); status != http.StatusServiceUnavailable {
		t.Errorf("/readyz with Redis down: %d %s", status, body)
	}

	srv.Restart(t)
	run.waitFor(t, 30*time.Second, func() bool {
		s1, _ := get(t, base+"/v1/admin/stages")
		s2, _ := get(t, base+"/readyz")
		return s1 == http.StatusOK && s2 == http.StatusOK
	}, "the API once Redis was back")
}
