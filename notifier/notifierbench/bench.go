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
	"sync"
	"time"

	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/internal/benchstat"
	"github.com/dropstream/dropstream/internal/egress"
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
	subscribers, messages, rate, copies, concurrency int
	duration                                         time.Duration
	history, throttle                                bool
	memProfile                                       string
}

func bind(fs *flag.FlagSet) flow.BenchRun {
	var c config
	fs.IntVar(&c.subscribers, "subscribers", 1000, "subscribers, one webhook destination each")
	fs.IntVar(&c.messages, "messages", 100000, "requests of the throughput run")
	fs.IntVar(&c.rate, "rate", 1000, "requests/s of the latency run")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "length of the latency run")
	fs.IntVar(&c.copies, "copies", 1, "copies of the notifier-deliver stage")
	fs.IntVar(&c.concurrency, "concurrency", 0, "sends in flight per stage copy (DeliverConfig.MaxInFlight); 0 takes the default")
	fs.BoolVar(&c.history, "history", true, "record every delivery in the history (Redis and notify.history)")
	fs.BoolVar(&c.throttle, "throttle", true, "the notifier's per-destination throttle, at the binary's defaults (false: off)")
	fs.StringVar(&c.memProfile, "memprofile", "", "write an allocation profile of the throughput run to this file")
	return flow.BenchRun{Run: func(ctx context.Context, env flow.BenchEnv) error { return run(ctx, env, c) }}
}

// run measures the throughput, then the latency.
func run(ctx context.Context, env flow.BenchEnv, c config) error {
	if c.subscribers < 1 || c.messages < 1 || c.rate < 1 || c.copies < 1 || c.duration <= 0 || c.concurrency < 0 {
		return errors.New("bench notifier: subscribers, messages, rate, copies and duration must be positive, concurrency not negative")
	}
	if env.Self == nil {
		return errors.New("bench notifier: the webhook sink runs in a process of its own, and this binary cannot start one")
	}
	partitions := env.Settings.Partitions
	sink, err := startSink(ctx, env.Self)
	if err != nil {
		return err
	}
	defer sink.close()
	topic := notifier.RequestTopic(partitions)
	store, err := subscriber.NewStore(env.Redis, subscriber.StoreConfig{MaxSubscribers: c.subscribers + 10})
	if err != nil {
		return err
	}
	ids := make([]string, c.subscribers)
	for i := range ids {
		c, err := store.Create(ctx, subscriber.Subscriber{Name: "bench " + strconv.Itoa(i),
			Destinations: []subscriber.Destination{{Kind: subscriber.KindWebhook, Address: sink.url + "/s/" + strconv.Itoa(i)}}})
		if err != nil {
			return fmt.Errorf("bench notifier: subscribe: %w", err)
		}
		d := c.Subscriber.Destinations[0]
		if _, _, err := store.Confirm(ctx, c.ConfirmTokens[d.ID]); err != nil {
			return err
		}
		ids[i] = c.Subscriber.ID
	}
	var hist *history.Recorder
	if c.history {
		if hist, err = history.NewRecorder(env.Redis, env.Publisher, history.Config{Partitions: partitions}); err != nil {
			return err
		}
	}
	th, err := throttle.New(env.Redis, throttle.Config{Disabled: !c.throttle})
	if err != nil {
		return err
	}
	// The webhooks may reach the bench's sink, on loopback, and nothing else.
	policy, err := egress.New(egress.Config{Allow: []string{strings.TrimPrefix(sink.url, "http://")}})
	if err != nil {
		return err
	}
	wh, err := notifier.NewWebhookChannel(notifier.WebhookConfig{Egress: policy})
	if err != nil {
		return err
	}
	d, err := notifier.NewDeliverer(env.Redis, topic, notifier.DeliverDeps{Subscribers: store, Throttle: th, History: hist, Publisher: env.Publisher,
		Channels: map[string]notifier.Channel{notifier.ChannelWebhook: wh}}, notifier.DeliverConfig{MaxInFlight: c.concurrency}, env.Telemetry)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "bench notifier: %s, %d partitions, %d subscribers, a webhook sink in another process, %d stage copies, history %v, throttle %v, GOMAXPROCS %d\n",
		env.RedisName, partitions, c.subscribers, c.copies, c.history, c.throttle, runtime.GOMAXPROCS(0))

	// Throughput: a backlog of requests, then the stage drains it.
	reqs := make([]notifier.Request, 0, 500)
	for i := 0; i < c.messages; i++ {
		reqs = append(reqs, notifier.Request{Flow: "bench", Event: "bench.tput", Subject: "item:" + strconv.Itoa(i),
			SubscriberID: ids[i%c.subscribers], Window: "w", Critical: true, Payload: json.RawMessage(`{"i":` + strconv.Itoa(i) + `}`)})
		if len(reqs) == cap(reqs) || i == c.messages-1 {
			if err := notifier.PublishRequests(ctx, env.Publisher, topic, reqs...); err != nil {
				return err
			}
			reqs = reqs[:0]
		}
	}
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	cpu0, rcpu0, allocs0 := benchstat.ProcessCPU(), benchstat.RedisCPU(ctx, env.Redis), benchstat.Allocated()
	start := time.Now()
	for range c.copies {
		r, err := stream.NewRunner(env.Redis, d.Stage(), env.Telemetry)
		if err != nil {
			return err
		}
		wg.Go(func() { _ = r.Run(runCtx) })
	}
	got, err := sink.waitFor(ctx, int64(c.messages), 10*time.Minute, env.Phases.Start("throughput: deliveries", int64(c.messages)))
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	cpu, rcpu, allocs := benchstat.ProcessCPU()-cpu0, benchstat.RedisCPU(ctx, env.Redis)-rcpu0, benchstat.Allocated().Minus(allocs0)
	if c.memProfile != "" {
		if err := benchstat.WriteHeapProfile(c.memProfile); err != nil {
			return err
		}
	}
	perSec := float64(c.messages) / elapsed.Seconds()
	fmt.Fprintf(env.Stdout, "throughput: %d deliveries in %s = %.0f deliveries/s, %d duplicates, %d connections [target ≥ %d/s: %s]\n",
		got.Received, elapsed.Round(time.Millisecond), perSec, got.Duplicates, got.Connections, targetDeliveriesPerSecond,
		flow.Verdict(perSec >= targetDeliveriesPerSecond))
	fmt.Fprintf(env.Stdout, "cpu per delivery: %.1f µs in this process (stage and webhook client), %.1f µs in Redis\n",
		float64(cpu.Microseconds())/float64(c.messages), float64(rcpu.Microseconds())/float64(c.messages))
	fmt.Fprintf(env.Stdout, "allocations per delivery: %.0f (%.0f B) in this process\n",
		float64(allocs.Objects)/float64(c.messages), float64(allocs.Bytes)/float64(c.messages))

	// Latency at a fixed rate: publish → received by the sink.
	if _, err := sink.do("reset"); err != nil {
		return err
	}
	total := int(float64(c.rate) * c.duration.Seconds())
	tick := time.Millisecond * 10
	perTick := max(1, c.rate/100)
	t := time.NewTicker(tick)
	sent := 0
	sending := env.Phases.Start(fmt.Sprintf("latency: publishing at %d/s", c.rate), int64(total))
	for sent < total {
		<-t.C
		batch := make([]notifier.Request, 0, perTick)
		now := time.Now()
		for j := 0; j < perTick && sent < total; j++ {
			batch = append(batch, notifier.Request{Flow: "bench", Event: "bench.lat", Subject: "lat:" + strconv.Itoa(sent),
				SubscriberID: ids[sent%c.subscribers], Window: "w", Critical: true, ObservedAt: now})
			sent++
		}
		if err := notifier.PublishRequests(ctx, env.Publisher, topic, batch...); err != nil {
			t.Stop()
			return err
		}
		sending.Set(int64(sent))
	}
	t.Stop()
	sending.Done("")
	if _, err := sink.waitFor(ctx, int64(total), time.Minute, env.Phases.Start("latency: deliveries", int64(total))); err != nil {
		return err
	}
	got2, err := sink.do("latencies")
	if err != nil {
		return err
	}
	lat := got2.Latencies
	fmt.Fprintf(env.Stdout, "latency at %d requests/s for %s: %d delivered, %d duplicates, p50 %s, p99 %s, max %s [target p99 ≤ %s: %s]\n",
		c.rate, c.duration, len(lat), got2.Duplicates-got.Duplicates, benchstat.Percentile(lat, 0.50), benchstat.Percentile(lat, 0.99), benchstat.Percentile(lat, 1), targetNotifierP99, flow.Verdict(benchstat.Percentile(lat, 0.99) <= targetNotifierP99))
	return nil
}
