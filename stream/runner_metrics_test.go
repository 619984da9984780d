package stream_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/dropstream/dropstream/internal/telemetrytest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// TestRunner_metrics checks that a stage is visible in metrics from the
// runtime alone: throughput by outcome, handler latency, lag, pending, the
// oldest pending entry's age and dead-letter length, with no
// instrumentation in the handler; with the binary's bound histograms and
// through the metric API alone.
func TestRunner_metrics(t *testing.T) {
	for _, bound := range []bool{true, false} {
		t.Run("bound="+strconv.FormatBool(bound), func(t *testing.T) {
			mp, collect := telemetrytest.Metrics(t)
			if !bound {
				testRunnerMetrics(t, mp.MeterProvider, collect)
				return
			}
			testRunnerMetrics(t, mp, collect)
		})
	}
}

func testRunnerMetrics(t *testing.T, mp metric.MeterProvider, collectMetrics func() metricdata.ResourceMetrics) {
	rdb, _, _, topic := observed(t, "metrics", 2)
	release := make(chan struct{})
	var bad = errors.New("bad")
	ctx := runObserved(t, rdb, mp, stream.Stage{Name: "observed", Topic: topic,
		Config: stream.RunnerConfig{Block: 20 * time.Millisecond, StatsInterval: 20 * time.Millisecond, BatchSize: 10,
			Retry: stream.RetryConfig{Disabled: true}},
		Handler: func(ctx context.Context, m *stream.Message) error {
			switch string(m.Payload) {
			case "poison":
				return stream.Permanent(bad)
			case "block":
				<-release
			}
			return nil
		}})
	pub := stream.NewPublisher(rdb, stream.Telemetry{MeterProvider: mp})
	msgs := []*stream.Message{stream.NewMessage("a", "t", []byte("poison"))}
	for i := 0; i < 20; i++ {
		msgs = append(msgs, stream.NewMessage("a", "t", []byte("ok")))
	}
	// One partition stalls on "block" so lag and pending build up behind it.
	msgs = append(msgs, stream.NewMessage("a", "t", []byte("block")))
	for i := 0; i < 30; i++ {
		msgs = append(msgs, stream.NewMessage("a", "t", []byte("ok")))
	}
	if err := pub.Publish(ctx, topic, msgs...); err != nil {
		t.Fatal(err)
	}
	collect := func() map[string]map[string]int64 {
		return flatten(collectMetrics())
	}
	testenv.WaitFor(t, 10*time.Second, func() bool {
		m := collect()
		return m["dropstream.stage.pending"]["observed"] >= 1 && m["dropstream.stage.lag"]["observed"] >= 1 &&
			m["dropstream.dlq.length"]["observed"] == 1 && m["dropstream.stage.pending.oldest_age"]["observed"] >= 1
	}, "lag, pending, oldest pending age and dlq gauges never showed the stalled partition")
	close(release)
	testenv.WaitFor(t, 10*time.Second, func() bool {
		m := collect()
		return m["dropstream.stage.messages"]["observed/acked"] == 51 && m["dropstream.stage.lag"]["observed"] == 0 &&
			m["dropstream.stage.pending"]["observed"] == 0 && m["dropstream.stage.pending.oldest_age"]["observed"] == 0
	}, "counts never settled")
	m := collect()
	for name, want := range map[string]int64{
		"dropstream.stage.messages|observed/dead_lettered": 1,
		"dropstream.stage.handler.duration|observed":       52,
		"dropstream.stage.message.age|observed":            52,
		"dropstream.stream.published|" + topic.String():    52,
		"dropstream.dlq.length|observed":                   1,
	} {
		metricName, key, _ := strings.Cut(name, "|")
		if got := m[metricName][key]; got != want {
			t.Errorf("%s{%s} = %d, want %d", metricName, key, got, want)
		}
	}
}

// observed returns a Redis, a meter provider with its collector, and a new
// topic of the given partitions.
func observed(t *testing.T, prefix string, partitions int) (redis.UniversalClient, metric.MeterProvider, func() metricdata.ResourceMetrics, stream.Topic) {
	t.Helper()
	rdb, err := stream.Dial(context.Background(), testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	mp, collect := telemetrytest.Metrics(t)
	return rdb, mp, collect, stream.NewTopic(prefix+strconv.FormatInt(time.Now().UnixNano(), 36), "in", partitions)
}

// runObserved runs a copy of stage reporting to mp until the test ends,
// and returns the context it runs under; into, if given, receives the
// runner.
func runObserved(t *testing.T, rdb redis.UniversalClient, mp metric.MeterProvider, stage stream.Stage, into ...**stream.Runner) context.Context {
	t.Helper()
	runner, err := stream.NewRunner(rdb, stage, stream.Telemetry{MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range into {
		*p = runner
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runner.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return ctx
}

// flatten maps metric name -> "stage[/outcome]" (or stream) -> value, with
// histograms as their count.
func flatten(rm metricdata.ResourceMetrics) map[string]map[string]int64 {
	out := map[string]map[string]int64{}
	key := func(set attribute.Set) string {
		k := ""
		if v, ok := set.Value("stage"); ok {
			k = v.AsString()
		} else if v, ok := set.Value("stream"); ok {
			k = v.AsString()
		}
		if v, ok := set.Value("outcome"); ok {
			k += "/" + v.AsString()
		}
		return k
	}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			vals := map[string]int64{}
			switch d := mt.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					vals[key(p.Attributes)] += p.Value
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					vals[key(p.Attributes)] += p.Value
				}
			case metricdata.Gauge[float64]: // seconds, kept as milliseconds
				for _, p := range d.DataPoints {
					vals[key(p.Attributes)] += int64(p.Value * 1000)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					vals[key(p.Attributes)] += int64(p.Count)
				}
			}
			out[mt.Name] = vals
		}
	}
	return out
}

// TestRunner_pausedAndDriftGauges: a copy reports its stage paused while
// it is, and its group's conservation drift: 0, then 1 once an entry is
// deleted unread behind its back.
func TestRunner_pausedAndDriftGauges(t *testing.T) {
	rdb, mp, collectMetrics, topic := observed(t, "gauges", 1)
	name := "gauged-" + topic.Flow
	var runner *stream.Runner
	ctx := runObserved(t, rdb, mp, stream.Stage{Name: name, Topic: topic,
		Config:  stream.RunnerConfig{Block: 20 * time.Millisecond, StatsInterval: 20 * time.Millisecond, ControlInterval: 20 * time.Millisecond},
		Handler: func(context.Context, *stream.Message) error { return nil }}, &runner)
	gauge := func(metric string) (int64, bool) {
		v, ok := flatten(collectMetrics())[metric][name]
		return v, ok
	}
	testenv.WaitFor(t, 10*time.Second, func() bool {
		p, pok := gauge("dropstream.stage.paused")
		d, dok := gauge("dropstream.stage.conservation.drift")
		return pok && p == 0 && dok && d == 0
	}, "the paused and drift gauges never showed a running, conserved stage")
	ctl := stream.NewControl(rdb)
	if err := ctl.Pause(ctx, name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ctl.Resume(context.Background(), name) })
	testenv.WaitFor(t, 10*time.Second, func() bool { p, _ := gauge("dropstream.stage.paused"); return p == 1 && runner.Paused() },
		"the paused gauge never showed the pause")
	msgs := []*stream.Message{stream.NewMessage("a", "t", []byte("1")), stream.NewMessage("a", "t", []byte("2"))}
	if err := stream.NewPublisher(rdb, stream.Telemetry{}).Publish(ctx, topic, msgs...); err != nil {
		t.Fatal(err)
	}
	if err := rdb.XDel(ctx, msgs[0].Stream, msgs[0].ID).Err(); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, func() bool { d, _ := gauge("dropstream.stage.conservation.drift"); return d == 1 },
		"the drift gauge never showed the entry deleted unread")
	if err := ctl.Resume(ctx, name); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, func() bool { p, _ := gauge("dropstream.stage.paused"); return p == 0 },
		"the paused gauge never showed the resume")
}
