package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/collector"
	"github.com/dropstream/dropstream/diff"
	"github.com/dropstream/dropstream/flows/avail/watch"
	"github.com/dropstream/dropstream/internal/egress/egresstest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer"
)

// settleTimeout bounds the final wait: entries held by a killed process are
// redelivered only once idle for the binary's ClaimIdle (30s for the diff,
// the normalizer and the projection), plus up to one ClaimInterval (5s).
const settleTimeout = 90 * time.Second

// TestAvailability_killStagesAndRestartRedis runs the availability stages
// as dropstream processes against a redis-server with an append-only file,
// kills the process of the diff and projection stages (and the normalizer)
// with kill -9 while it holds unacknowledged work, restarts it, then kills
// the process of the ClickHouse appends (the writer's analytics stages) the
// same way while it holds transitions or runs it has read, and perhaps
// inserted, but not acknowledged, and restarts it, later kills
// redis-server with kill -9 while the restarted diff process holds work and
// restarts it, keeps polling throughout, and once everything settled checks
// that the projection equals the simulator's truth, that ClickHouse holds
// every transition, run and session exactly once, and that every stable
// opening was delivered exactly once.
func TestAvailability_killStagesAndRestartRedis(t *testing.T) {
	ctx := context.Background()
	// fsync always: the README ("Redis durability") explains that only
	// then does every acknowledged write survive kill -9; with everysec a
	// loaded Redis may lose its last seconds.
	srv := testenv.StartRedis(t, testenv.RedisConfig{AppendOnly: true, AppendFsync: "always"})
	dsn := testenv.ClickHouseDSN(t)
	ch := testenv.OpenClickHouse(t, dsn)
	bin := buildBinary(t)
	rdb := dial(t, srv.URL())
	topics := avail.NewTopics(partitions)
	tel := telemetry(t)
	proj, err := writer.NewProjection(rdb, writer.ProjectionConfig{Partitions: partitions}, tel)
	if err != nil {
		t.Fatal(err)
	}

	w := newWorld(t, 6)
	hook := newWebhook(t)
	w.newWatchers(t, ctx, rdb, hook)
	col, err := collector.NewCollector(topics, stream.NewPublisher(rdb, tel), collector.CollectorConfig{NoJitter: true, Telemetry: tel, Egress: egresstest.Loopback(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = col.Close() })
	if err := col.Upsert(w.src); err != nil {
		t.Fatal(err)
	}

	all := pipelineGroups(topics)
	normalize := group{topics.Raw, collector.NormalizerStage}
	differ := group{topics.Snapshots, diff.StageName}
	project := group{topics.Transitions, writer.StageProjection}
	notify := []group{{topics.Transitions, watch.StageNotifier}}
	analyze := []group{{topics.Transitions, writer.StageAnalyticsTransitions}, {topics.Runs, writer.StageAnalyticsRuns}}
	run := []string{"run", "--api-addr", "", "--redis-url", srv.URL(), "--partitions", strconv.Itoa(partitions), "--clickhouse-dsn", dsn}
	diffStages := []string{collector.NormalizerStage, diff.StageName, writer.StageProjection}
	analyticsStages := []string{writer.StageAnalyticsTransitions, writer.StageAnalyticsRuns}
	startDiff := func() *proc {
		// A short ClaimIdle lets the restarted copy take over the killed
		// copy's entries within seconds instead of the default 30s.
		p := startProc(t, bin, "diff+projection", append(run, "--stages", strings.Join(diffStages, ","),
			"--claim-idle", "5s", "--handler-timeout", "500ms")...)
		p.waitStarted(t, diffStages...)
		return p
	}
	startAnalytics := func() *proc {
		// Likewise; a handler waits at most 3s for its flush.
		p := startProc(t, bin, "analytics", append(run, "--stages", strings.Join(analyticsStages, ","),
			"--claim-idle", "6s", "--handler-timeout", "3s")...)
		p.waitStarted(t, analyticsStages...)
		return p
	}
	a := startDiff()
	b := startProc(t, bin, "notifier", append(run, "--stages", watch.StageNotifier)...)
	b.waitStarted(t, watch.StageNotifier)
	c := startAnalytics()

	round := 0
	feed := func() {
		t.Helper()
		if round > 0 {
			w.sim.Advance(1)
		}
		round++
		if err := col.PollOnce(ctx, sourceID); err != nil {
			t.Fatalf("round %d: poll: %v", round, err)
		}
		w.observe(t, ctx, rdb, topics)
	}
	waitIdle := func(timeout time.Duration, groups ...group) {
		t.Helper()
		why := new(reason)
		testenv.WaitFor(t, timeout, func() bool { return why.set(busy(ctx, rdb, groups)) },
			"round %d: idle (still busy: %s)", round, why)
	}
	// feedInHand freezes p, polls, and lets p go until it holds work of
	// groups (among its groups mine), then freezes it again; it polls again
	// when p got through a poll's work unseen.
	feedInHand := func(p *proc, mine []group, groups ...group) map[string]int64 {
		t.Helper()
		for attempt := 0; attempt < 5; attempt++ {
			p.freeze(t)
			feed()
			if held := catchInHand(t, ctx, rdb, p, mine, groups...); held != nil {
				return held
			}
		}
		t.Fatalf("%s was never seen holding work of %v", p.name, groups)
		return nil
	}
	diffWork := []group{normalize, differ, project}

	// Two rounds without faults, checked in full.
	for range 2 {
		feed()
		waitIdle(30*time.Second, all...)
		w.checkAll(t, ctx, rdb, topics, proj, ch, hook, w.expect(t, nil))
		if t.Failed() {
			t.FailNow()
		}
	}

	// kill -9 of the diff and projection process with work in hand; one
	// poll while it is down, then a new copy. The entries the dead copy
	// held are redelivered once idle for ClaimIdle.
	held := feedInHand(a, diffWork, differ, project)
	a.kill()
	t.Logf("round %d: killed %s holding %v", round, a.name, held)
	feed()
	a = startDiff()
	t.Logf("round %d: restarted as %s", round, a.name)

	// kill -9 of the analytics process with transitions or runs in hand
	// (read, waiting for their flush or flushed, not acknowledged), one
	// poll while it is down, then a new copy, which inserts them again.
	held = feedInHand(c, analyze, analyze...)
	c.kill()
	t.Logf("round %d: killed %s holding %v", round, c.name, held)
	feed()
	c = startAnalytics()
	t.Logf("round %d: restarted as %s", round, c.name)

	// kill -9 of redis-server while the new copy, frozen, holds diff or
	// projection work, and once the notifier and analytics processes hold
	// none: a notification whose delivery Redis cannot record may go out
	// twice by design (see the notifier's package doc), and their
	// ClaimIdle is minutes long.
	held = feedInHand(a, diffWork, differ, project)
	waitIdle(30*time.Second, append(notify, analyze...)...)
	srv.Kill()
	t.Logf("round %d: killed redis-server while %s held %v", round, a.name, held)
	srv.Restart(t)
	a.resume()

	for range 3 {
		feed()
		waitLagFree(t, ctx, rdb, all)
	}
	start := time.Now()
	waitIdle(settleTimeout, all...)
	t.Logf("round %d: pipeline settled after %v", round, time.Since(start).Round(time.Millisecond))
	for _, p := range []*proc{a, b, c} {
		if p.exited() {
			t.Errorf("%s exited", p.name)
		}
	}
	em := readEmitted(t, ctx, rdb, topics)
	exp := w.expect(t, em.applied)
	t.Logf("%s; %d of %d runs applied", exp.summary(), len(em.applied), exp.polls)
	w.checkAll(t, ctx, rdb, topics, proj, ch, hook, exp)
	checkProjectionEntities(t, ctx, proj, exp, false)
	checkClickHouseSessions(t, ctx, ch, exp)
	for _, table := range []string{clickhouse.TableTransitions, clickhouse.TableRuns, clickhouse.TableSessions} {
		var rows uint64
		if err := ch.Conn().QueryRow(ctx, "SELECT count() FROM "+table).Scan(&rows); err != nil {
			t.Errorf("count rows of %s: %v", table, err)
		}
		t.Logf("ClickHouse %s: %d rows before merges", table, rows)
	}
}

// catchInHand resumes the frozen process p and freezes it again as soon as
// it holds unacknowledged entries of groups; it returns them, or nil when p
// worked through the backlog of all its groups (groups among them) without
// being caught.
func catchInHand(t *testing.T, ctx context.Context, rdb redis.UniversalClient, p *proc, all []group, groups ...group) map[string]int64 {
	t.Helper()
	p.resume()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		held, err := pendingOf(ctx, rdb, p.pid(), groups...)
		if err != nil || total(held) == 0 {
			if err == nil && lagFree(ctx, rdb, all) {
				if again, err := pendingOf(ctx, rdb, p.pid(), all...); err == nil && total(again) == 0 {
					return nil
				}
			}
			continue
		}
		p.freeze(t)
		// Commands p sent before it stopped reach Redis first: read twice.
		if _, err = pendingOf(ctx, rdb, p.pid(), groups...); err == nil {
			held, err = pendingOf(ctx, rdb, p.pid(), groups...)
		}
		if err == nil && total(held) > 0 {
			return held
		}
		p.resume()
	}
	t.Fatalf("%s neither held work nor finished within 20s", p.name)
	return nil
}

// lagFree reports whether every group has received every entry.
func lagFree(ctx context.Context, rdb redis.UniversalClient, groups []group) bool {
	for _, g := range groups {
		for p := 0; p < g.topic.Partitions; p++ {
			info, err := groupInfo(ctx, rdb, g.topic.Stream(p), g.name)
			if err != nil || received(ctx, rdb, g.topic.Stream(p), info) != "" {
				return false
			}
		}
	}
	return true
}

// waitLagFree waits until every group has received every entry (entries
// may still be pending, such as those of a killed consumer).
func waitLagFree(t *testing.T, ctx context.Context, rdb redis.UniversalClient, groups []group) {
	t.Helper()
	testenv.WaitFor(t, 30*time.Second, func() bool { return lagFree(ctx, rdb, groups) }, "every entry delivered")
}
