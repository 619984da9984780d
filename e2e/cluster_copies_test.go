package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// pollersDrivenByTest are the services of the binary whose work the test
// drives itself, so that it knows every poll the flows saw and can check
// their outcomes exactly: the test polls in its own process
// (collector.Collector.PollOnce, feed Poller.PollOnce) instead. Both
// pollers run safely in many copies (their poll gates, package pollgate:
// TestCollector_copiesShareTheScheduleOfEveryScope and
// TestPoller_copiesShareTheFeedsSchedule show two copies sharing one
// schedule).
var pollersDrivenByTest = map[string]string{
	"avail-collector": "availability polls come from collector.PollOnce in the test",
	"feed-poller":     "feed polls come from the feed flow's Poller.PollOnce in the test",
}

const (
	// copiesPartitions is the partition count of the deployment.
	copiesPartitions = partitions
	// maxCopiesWaves bounds the waves of work driven until both processes
	// have handled a message of every stage.
	maxCopiesWaves = 12
	// copiesSettle bounds the wait for a wave's work to settle.
	copiesSettle = 90 * time.Second
)

// copiesFlow drives one flow of the deployment through the processes'
// APIs (alternating between them) or, for its poller, from the test.
type copiesFlow interface {
	name() string
	// setup prepares what the waves need (subscriptions, items, ...).
	setup(t *testing.T, e *copiesEnv)
	// wave drives the work of wave n.
	wave(t *testing.T, e *copiesEnv, n int)
	// settled returns "" once every outside effect of the waves so far
	// arrived (webhook calls, for instance), else what is missing.
	settled(e *copiesEnv) string
	// lacking returns "" once the waves gave check something to check,
	// else what is lacking (the test then drives another wave).
	lacking(t *testing.T) string
	// check compares what a user sees with what the waves did.
	check(t *testing.T, e *copiesEnv)
}

// copiesEnv is the deployment under test: two dropstream processes on a
// Redis Cluster and ClickHouse.
type copiesEnv struct {
	nodes string
	rdb   redis.UniversalClient
	ch    *clickhouse.Client
	apis  [2]string // base URLs of the processes' APIs
	web   *http.Client
}

// listedStage is a line of `dropstream run --list-stages`.
type listedStage struct {
	Name       string `json:"name"`
	Kind       string `json:"kind"`
	Flow       string `json:"flow"`
	Topic      string `json:"topic"`
	Partitions int    `json:"partitions"`
	Group      string `json:"group"`
}

func (s listedStage) topic() stream.Topic { return stream.NewTopic(s.Flow, s.Topic, s.Partitions) }

// TestCluster_twoProcessesShareEveryStage runs two dropstream processes on
// a 3-master Redis Cluster with ClickHouse, each running every stage the
// binary lists (`run --list-stages`) and every service but the pollers
// (pollersDrivenByTest). It drives waves of work through every flow, via
// the two APIs in turn, each wave until the deployment is idle, until both
// processes have handled messages of every stage. It then checks, per
// stage, that each process handled some, that the messages handled over
// both equal the entries of the stage's streams (none handled twice), that
// the group is drained (nothing lost) and that nothing was dead-lettered;
// and per flow what a user would check (deliveries, stock and credit,
// ClickHouse counts, ...).
func TestCluster_twoProcessesShareEveryStage(t *testing.T) {
	ctx := context.Background()
	cl := testenv.StartRedisCluster(t, testenv.RedisClusterConfig{})
	dsn := testenv.ClickHouseDSN(t)
	e := &copiesEnv{nodes: cl.URL(), ch: testenv.OpenClickHouse(t, dsn), web: &http.Client{Timeout: 30 * time.Second}}
	e.rdb = dial(t, e.nodes)
	stages, procs := startCopies(t, e, dsn)

	flows := []copiesFlow{&availCopies{}, &sampleCopies{}, &checkoutCopies{}, &comicCopies{}, &feedCopies{}, &offerCopies{}}
	for _, f := range flows {
		f.setup(t, e)
	}
	groups := make([]group, 0, len(stages))
	for _, s := range stages {
		groups = append(groups, group{s.topic(), s.Group})
	}
	var counts [2]map[string]outcomes
	for wave := 0; ; wave++ {
		if wave == maxCopiesWaves {
			t.Fatalf("after %d waves: stages not handled by both processes: %s; flows lacking work: %s", wave, unshared(stages, counts), lacking(t, flows))
		}
		start := time.Now()
		for _, f := range flows {
			f.wave(t, e, wave)
		}
		why := new(reason)
		testenv.WaitFor(t, copiesSettle, func() bool { return why.set(e.settled(ctx, groups, flows)) },
			"wave %d settled (still waiting for: %s)", wave, why)
		counts = [2]map[string]outcomes{e.stageOutcomes(t, 0), e.stageOutcomes(t, 1)}
		missing, short := unshared(stages, counts), lacking(t, flows)
		t.Logf("wave %d settled in %v; not yet handled by both: %s; flows lacking work: %s", wave, time.Since(start).Round(time.Millisecond), missing, short)
		if missing == "none" && short == "none" {
			break
		}
	}

	// The offer flow publishes its search history in the background: wait
	// until every stage handled at least as many messages as its streams
	// hold (more is a failure no wait undoes).
	why := new(reason)
	testenv.WaitFor(t, copiesSettle, func() bool {
		if s := e.settled(ctx, groups, flows); s != "" {
			return why.set(s)
		}
		counts = [2]map[string]outcomes{e.stageOutcomes(t, 0), e.stageOutcomes(t, 1)}
		for _, s := range stages {
			n := e.streamLen(t, s.topic())
			if sum := counts[0][s.Name].handled() + counts[1][s.Name].handled(); sum < n {
				return why.set(fmt.Sprintf("%s handled %d of %d entries", s.Name, sum, n))
			}
		}
		return why.set("")
	}, "every entry handled (%s)", why)
	e.checkStages(t, stages, counts)
	for _, f := range flows {
		t.Run(f.name(), func(t *testing.T) { f.check(t, e) })
	}
	for _, p := range procs {
		if p.exited() {
			t.Errorf("%s exited", p.name)
		}
	}
}

// startCopies starts the two processes, each with every stage and every
// service but the pollers, and waits until they run; it returns the
// stages and the processes.
func startCopies(t *testing.T, e *copiesEnv, dsn string) ([]listedStage, [2]*proc) {
	t.Helper()
	bin := buildBinary(t)
	// No entry is trimmed within the test: the counts compare stream
	// lengths with the messages handled.
	common := []string{"--redis-url", e.nodes, "--clickhouse-dsn", dsn, "--partitions", strconv.Itoa(copiesPartitions), "--trim-min-age", "1h"}
	stages, services := listStages(t, bin, common)
	names := make([]string, 0, len(stages))
	for _, s := range stages {
		names = append(names, s.Name)
	}
	run := slices.Clone(names)
	for _, s := range services {
		if pollersDrivenByTest[s] == "" {
			run = append(run, s)
		}
	}
	for poller := range pollersDrivenByTest {
		if !slices.Contains(services, poller) {
			t.Errorf("service %s is no longer listed: remove it from pollersDrivenByTest", poller)
		}
	}
	var procs [2]*proc
	for i := range procs {
		addr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
		e.apis[i] = "http://" + addr
		procs[i] = startProc(t, bin, "copy-"+strconv.Itoa(i+1), append([]string{"run", "--api-addr", addr, "--stages", strings.Join(run, ",")}, common...)...)
	}
	for i, p := range procs {
		p.waitStarted(t, names...)
		testenv.WaitFor(t, 30*time.Second, func() bool { return e.status(e.apis[i]+"/readyz") == http.StatusOK }, "%s ready", p.name)
	}
	t.Logf("both processes run %d stages and the services %v", len(stages), run[len(names):])
	return stages, procs
}

// checkStages checks, per stage, that both processes handled messages,
// that together they handled each entry of its streams once, and that
// none was dead-lettered.
func (e *copiesEnv) checkStages(t *testing.T, stages []listedStage, counts [2]map[string]outcomes) {
	t.Helper()
	for _, s := range stages {
		a, b := counts[0][s.Name], counts[1][s.Name]
		n := e.streamLen(t, s.topic())
		t.Logf("%-28s %5d entries: copy-1 %4d, copy-2 %4d (retried %d)", s.Name, n, a.handled(), b.handled(), a.failed+b.failed)
		if a.handled() == 0 || b.handled() == 0 {
			t.Errorf("stage %s: handled %d and %d by the two processes, want both above 0", s.Name, a.handled(), b.handled())
		}
		if a.handled()+b.handled() != n {
			t.Errorf("stage %s: %d + %d messages handled, the streams of %s hold %d: each entry must be handled once",
				s.Name, a.handled(), b.handled(), s.topic(), n)
		}
		if a.deadLettered+b.deadLettered > 0 {
			t.Errorf("stage %s: %d messages dead-lettered", s.Name, a.deadLettered+b.deadLettered)
		}
		if dl, err := stream.NewDeadLetters(e.rdb).Count(context.Background(), s.topic()); err != nil || dl != 0 {
			t.Errorf("%s: %d dead letters (%v), want 0", s.topic(), dl, err)
		}
	}
}

// listStages returns the stages and the services of the binary, from
// `dropstream run --list-stages` with the deployment's flags.
func listStages(t *testing.T, bin string, flags []string) ([]listedStage, []string) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"run", "--list-stages", "--api-addr", ""}, flags...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("dropstream run --list-stages: %v\n%s", err, stderr.String())
	}
	var stages []listedStage
	var services []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var s listedStage
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatalf("run --list-stages printed %q: %v", sc.Text(), err)
		}
		switch {
		case s.Kind == "service":
			services = append(services, s.Name)
		case s.Kind == "stage" && s.Group != "" && s.topic().Validate() == nil:
			stages = append(stages, s)
		default:
			t.Fatalf("run --list-stages printed %q: want a stage with its topic and group, or a service", sc.Text())
		}
	}
	if len(stages) == 0 {
		t.Fatalf("run --list-stages listed no stage:\n%s", out)
	}
	return stages, services
}

// outcomes are the messages of one stage a process settled, by outcome.
type outcomes struct{ acked, dropped, deadLettered, failed int64 }

// handled counts the messages settled for good (acknowledged or
// dead-lettered); failed ones are delivered again.
func (o outcomes) handled() int64 { return o.acked + o.dropped + o.deadLettered }

// stageOutcomes reads dropstream_stage_messages_total of process i.
func (e *copiesEnv) stageOutcomes(t *testing.T, i int) map[string]outcomes {
	t.Helper()
	resp, err := e.web.Get(e.apis[i] + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics of copy %d: %v", i+1, err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics of copy %d: %v", i+1, err)
	}
	out := map[string]outcomes{}
	fam := families["dropstream_stage_messages_total"]
	if fam == nil {
		return out
	}
	for _, m := range fam.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		o, n := out[labels["stage"]], int64(m.GetCounter().GetValue())
		switch stream.Outcome(labels["outcome"]) {
		case stream.OutcomeAcked:
			o.acked += n
		case stream.OutcomeDropped:
			o.dropped += n
		case stream.OutcomeDeadLettered:
			o.deadLettered += n
		case stream.OutcomeFailed:
			o.failed += n
		}
		out[labels["stage"]] = o
	}
	return out
}

// unshared lists the stages not yet handled by both processes, or "none".
func unshared(stages []listedStage, counts [2]map[string]outcomes) string {
	var out []string
	for _, s := range stages {
		var by []string
		for i, c := range counts {
			if c[s.Name].handled() == 0 {
				by = append(by, "copy-"+strconv.Itoa(i+1))
			}
		}
		if len(by) > 0 {
			out = append(out, s.Name+" (not by "+strings.Join(by, ", ")+")")
		}
	}
	if len(out) == 0 {
		return "none"
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

// lacking lists the flows whose waves gave their checks too little to
// check, or "none".
func lacking(t *testing.T, flows []copiesFlow) string {
	var out []string
	for _, f := range flows {
		if why := f.lacking(t); why != "" {
			out = append(out, f.name()+": "+why)
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "; ")
}

// settled returns "" when every group is drained and every flow has seen
// its outside effects, else what is still busy.
func (e *copiesEnv) settled(ctx context.Context, groups []group, flows []copiesFlow) string {
	if why := busy(ctx, e.rdb, groups); why != "" {
		return why
	}
	for _, f := range flows {
		if why := f.settled(e); why != "" {
			return f.name() + ": " + why
		}
	}
	return ""
}

// streamLen sums XLEN over the partitions of topic.
func (e *copiesEnv) streamLen(t *testing.T, topic stream.Topic) int64 {
	t.Helper()
	var n int64
	for p := 0; p < topic.Partitions; p++ {
		l, err := e.rdb.XLen(context.Background(), topic.Stream(p)).Result()
		if err != nil {
			t.Fatalf("XLEN %s: %v", topic.Stream(p), err)
		}
		n += l
	}
	return n
}

// api returns the base URL of the API that call n goes to: the two
// processes in turn.
func (e *copiesEnv) api(n int) string { return e.apis[n%2] }

// status returns the status of GET url, 0 on a transport error.
func (e *copiesEnv) status(url string) int {
	resp, err := e.web.Get(url)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// call sends a JSON request (body nil: none) to the API of call n and
// decodes the answer into out (when not nil); it fails the test unless the
// status is one of want. It returns the status and the body.
func (e *copiesEnv) call(t *testing.T, n int, method, path string, body, out any, want ...int) (int, []byte) {
	t.Helper()
	var in io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		in = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.api(n)+path, in)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := e.web.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatalf("%s %s: read the answer: %v", method, path, err)
	}
	if !slices.Contains(want, resp.StatusCode) {
		t.Fatalf("%s %s%s = %d %s, want %v", method, e.api(n), path, resp.StatusCode, got, want)
	}
	if out != nil {
		if err := json.Unmarshal(got, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, got, err)
		}
	}
	return resp.StatusCode, got
}
