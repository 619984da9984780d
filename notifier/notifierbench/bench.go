// Package notifierbench is `dropstream bench notifier`: StageDeliver with
// its ledger against a local webhook sink, for throughput then latency.
// The sink runs in a process of its own (ServeSink), so the process's CPU
// figure is the notifier's alone.
package notifierbench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/internal/benchstat"
	"github.com/dropstream/dropstream/internal/egress"
	"github.com/dropstream/dropstream/internal/settings"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/history"
	"github.com/dropstream/dropstream/notifier/subscriber"
	"github.com/dropstream/dropstream/notifier/throttle"
	"github.com/dropstream/dropstream/stream"
)

// The figures the notifier aims at on the reference machine.
const (
	targetDeliveriesPerSecond = 20000
	targetNotifierP99         = 10 * time.Millisecond
)

// Bench is `dropstream bench notifier`.
var Bench = flow.Bench{
	Name: "notifier",
	Summary: "the generic notifier with its ledger on: deliveries/s to a local webhook sink,\n" +
		"then the latency it adds (publish → received) at a fixed rate",
	Help: "Measures the notifier-deliver stage against the configured Redis (an empty database):\n" +
		"deliveries/s to a local webhook sink (a process of its own) with the delivery ledger on, and the latency it adds at a fixed rate.",
	Bind: bind,
}

// config are the target's own flags.
type config struct {
	Subscribers int           `flag:"subscribers" default:"1000" range:"1.." help:"subscribers, one webhook destination each"`
	Messages    int           `flag:"messages" default:"100000" range:"1.." help:"requests of the throughput run"`
	Rate        int           `flag:"rate" default:"1000" range:"1.." help:"requests/s of the latency run"`
	Duration    time.Duration `flag:"duration" default:"10s" range:"1ns.." help:"length of the latency run"`
	Copies      int           `flag:"copies" default:"1" range:"1.." help:"copies of the notifier-deliver stage"`
	Concurrency int           `flag:"concurrency" range:"0.." help:"sends in flight per stage copy (DeliverConfig.MaxInFlight); 0 takes the default"`
	History     bool          `flag:"history" default:"true" help:"record every delivery in the history (Redis and notify.history)"`
	Throttle    bool          `flag:"throttle" default:"true" help:"the notifier's per-destination throttle, at the binary's defaults (false: off)"`
	MemProfile  string        `flag:"memprofile" help:"write an allocation profile of the throughput run to this file"`
}

func bind(fs *flag.FlagSet) flow.BenchRun {
	var c config
	settings.BindFlags(fs, &c)
	return flow.BenchRun{Run: func(ctx context.Context, env flow.BenchEnv) error { return run(ctx, env, c) }}
}

// run measures the throughput, then the latency.
func run(ctx context.Context, env flow.BenchEnv, c config) error {
	if err := settings.Check("bench notifier", &c); err != nil {
		return err
	}
	if env.Self == nil {
		return errors.New("bench notifier: the webhook sink runs in a process of its own, and this binary cannot start one")
	}
	partitions := env.Settings.Partitions
	h, err := benchstat.StartHelper(env.Self(SinkArgs...), "bench notifier: sink process")
	if err != nil {
		return err
	}
	defer h.Close()
	sink := sinkProcess{h}
	topic := notifier.RequestTopic(partitions)
	store, err := subscriber.NewStore(env.Redis, subscriber.StoreConfig{MaxSubscribers: c.Subscribers + 10})
	if err != nil {
		return err
	}
	ids := make([]string, c.Subscribers)
	for i := range ids {
		c, err := store.Create(ctx, subscriber.Subscriber{Name: "bench " + strconv.Itoa(i),
			Destinations: []subscriber.Destination{{Kind: subscriber.KindWebhook, Address: sink.URL + "/s/" + strconv.Itoa(i)}}})
		if err != nil {
			return fmt.Errorf("bench notifier: subscribe: %w", err)
		}
		if _, _, err := store.Confirm(ctx, c.ConfirmTokens[c.Subscriber.Destinations[0].ID]); err != nil {
			return err
		}
		ids[i] = c.Subscriber.ID
	}
	var hist *history.Recorder
	if c.History {
		if hist, err = history.NewRecorder(env.Redis, env.Publisher, history.Config{Partitions: partitions}); err != nil {
			return err
		}
	}
	th, err := throttle.New(env.Redis, throttle.Config{Disabled: !c.Throttle})
	if err != nil {
		return err
	}
	// The webhooks may reach the bench's sink, on loopback, and nothing else.
	policy, err := egress.New(egress.Config{Allow: []string{strings.TrimPrefix(sink.URL, "http://")}})
	if err != nil {
		return err
	}
	wh, err := notifier.NewWebhookChannel(notifier.WebhookConfig{Egress: policy})
	if err != nil {
		return err
	}
	d, err := notifier.NewDeliverer(env.Redis, topic, notifier.DeliverDeps{Subscribers: store, Throttle: th, History: hist, Publisher: env.Publisher,
		Channels: map[string]notifier.Channel{notifier.ChannelWebhook: wh}}, notifier.DeliverConfig{MaxInFlight: c.Concurrency}, env.Telemetry)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "bench notifier: %s, %d partitions, %d subscribers, a webhook sink in another process, %d stage copies, history %v, throttle %v, GOMAXPROCS %d\n",
		env.RedisName, partitions, c.Subscribers, c.Copies, c.History, c.Throttle, runtime.GOMAXPROCS(0))

	// Throughput: a backlog of requests, then the stage drains it.
	reqs := make([]notifier.Request, 0, 500)
	for i := 0; i < c.Messages; i++ {
		reqs = append(reqs, notifier.Request{Flow: "bench", Event: "bench.tput", Subject: "item:" + strconv.Itoa(i),
			SubscriberID: ids[i%c.Subscribers], Window: "w", Critical: true, Payload: json.RawMessage(`{"i":` + strconv.Itoa(i) + `}`)})
		if len(reqs) == cap(reqs) || i == c.Messages-1 {
			if err := notifier.PublishRequests(ctx, env.Publisher, topic, reqs...); err != nil {
				return err
			}
			reqs = reqs[:0]
		}
	}
	cpu0, allocs0 := benchstat.ReadCPU(ctx, env.Redis), benchstat.Allocated()
	start := time.Now()
	stop, err := stream.RunStages(ctx, env.Redis, env.Telemetry, c.Copies, d.Stage())
	if err != nil {
		return err
	}
	defer stop()
	got, err := sink.waitFor(ctx, int64(c.Messages), 10*time.Minute, env.Phases.Start("throughput: deliveries", int64(c.Messages)))
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	cpu, allocs := benchstat.ReadCPU(ctx, env.Redis).PerItem(cpu0, c.Messages), benchstat.Allocated().Minus(allocs0)
	if c.MemProfile != "" {
		if err := benchstat.WriteHeapProfile(c.MemProfile); err != nil {
			return err
		}
	}
	perSec := float64(c.Messages) / elapsed.Seconds()
	fmt.Fprintf(env.Stdout, "throughput: %d deliveries in %s = %.0f deliveries/s, %d duplicates, %d connections [target ≥ %d/s: %s]\n",
		got.Received, elapsed.Round(time.Millisecond), perSec, got.Duplicates, got.Connections, targetDeliveriesPerSecond,
		flow.Verdict(perSec >= targetDeliveriesPerSecond))
	fmt.Fprintf(env.Stdout, "cpu per delivery: %.1f µs in this process (stage and webhook client), %.1f µs in Redis\n",
		benchstat.Micros(cpu.Process), benchstat.Micros(cpu.Redis))
	fmt.Fprintf(env.Stdout, "allocations per delivery: %.0f (%.0f B) in this process\n",
		float64(allocs.Objects)/float64(c.Messages), float64(allocs.Bytes)/float64(c.Messages))

	// Latency at a fixed rate: publish → received by the sink.
	if _, err := sink.do("reset"); err != nil {
		return err
	}
	total := int(float64(c.Rate) * c.Duration.Seconds())
	sending := env.Phases.Start(fmt.Sprintf("latency: publishing at %d/s", c.Rate), int64(total))
	if err := benchstat.Pace(ctx, 10*time.Millisecond, float64(c.Rate), total, sending, func(from, n int) error {
		batch := make([]notifier.Request, n)
		for i := range batch {
			batch[i] = notifier.Request{Flow: "bench", Event: "bench.lat", Subject: "lat:" + strconv.Itoa(from+i),
				SubscriberID: ids[(from+i)%c.Subscribers], Window: "w", Critical: true, ObservedAt: time.Now()}
		}
		return notifier.PublishRequests(ctx, env.Publisher, topic, batch...)
	}); err != nil {
		return err
	}
	if _, err := sink.waitFor(ctx, int64(total), time.Minute, env.Phases.Start("latency: deliveries", int64(total))); err != nil {
		return err
	}
	got2, err := sink.do("latencies")
	if err != nil {
		return err
	}
	lat := benchstat.Summarize(got2.Latencies).Round(10 * time.Microsecond)
	fmt.Fprintf(env.Stdout, "latency at %d requests/s for %s: %d delivered, %d duplicates, %s [target p99 ≤ %s: %s]\n",
		c.Rate, c.Duration, len(got2.Latencies), got2.Duplicates-got.Duplicates, lat, targetNotifierP99, flow.Verdict(lat.P99 <= targetNotifierP99))
	return nil
}
