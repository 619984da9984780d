package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/history"
	"github.com/dropstream/dropstream/notifier/subscriber"
	"github.com/dropstream/dropstream/notifier/throttle"
	"github.com/dropstream/dropstream/stream"
)

// Targets of issue 5.
const (
	targetDeliveriesPerSecond = 20000
	targetNotifierP99         = 10 * time.Millisecond
)

func init() {
	registerBench(benchTarget{"notifier", "the generic notifier with its ledger on: deliveries/s to a local webhook sink,\n" +
		"then the latency it adds (publish → received) at a fixed rate", runBenchNotifier})
}

// runBenchNotifier is `dropstream bench notifier`.
func runBenchNotifier(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg Config
	var subs, messages, rate, copies, concurrency int
	var dur time.Duration
	var withHistory bool
	fs := flagSet("bench notifier", "Measures the notifier-deliver stage against the configured Redis (an empty database):\n"+
		"deliveries/s to a local webhook sink with the delivery ledger on, and the latency it adds at a fixed rate.", stderr, &cfg, "json")
	fs.IntVar(&subs, "subscribers", 1000, "subscribers, one webhook destination each")
	fs.IntVar(&messages, "messages", 100000, "requests of the throughput run")
	fs.IntVar(&rate, "rate", 1000, "requests/s of the latency run")
	fs.DurationVar(&dur, "duration", 10*time.Second, "length of the latency run")
	fs.IntVar(&copies, "copies", 1, "copies of the notifier-deliver stage")
	fs.IntVar(&concurrency, "concurrency", 0, "sends in flight per stage copy (DeliverConfig.MaxInFlight); 0 takes the default")
	fs.BoolVar(&withHistory, "history", true, "record every delivery in the history (Redis and notify.history)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the bench to this file")
	memProfile := fs.String("memprofile", "", "write an allocation profile of the throughput run to this file")
	if err := fs.parse(args); err != nil {
		return err
	}
	if subs < 1 || messages < 1 || rate < 1 || copies < 1 || dur <= 0 || concurrency < 0 {
		return errors.New("bench notifier: subscribers, messages, rate, copies and duration must be positive, concurrency not negative")
	}
	a, stop, err := benchApp(ctx, cfg, *cpuProfile, stderr)
	if err != nil {
		return err
	}
	defer stop()
	sink, err := newBenchSink()
	if err != nil {
		return err
	}
	defer sink.close()
	topic := notifier.RequestTopic(cfg.Partitions)
	store, err := subscriber.NewStore(a.rdb, subscriber.StoreConfig{MaxSubscribers: subs + 10})
	if err != nil {
		return err
	}
	ids := make([]string, subs)
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
	if withHistory {
		if hist, err = history.NewRecorder(a.rdb, a.pub, history.Config{Partitions: cfg.Partitions}); err != nil {
			return err
		}
	}
	th, err := throttle.New(a.rdb, throttle.Config{Disabled: true})
	if err != nil {
		return err
	}
	wh, err := notifier.NewWebhookChannel(notifier.WebhookConfig{})
	if err != nil {
		return err
	}
	d, err := notifier.NewDeliverer(a.rdb, topic, notifier.DeliverDeps{Subscribers: store, Throttle: th, History: hist, Publisher: a.pub,
		Channels: map[string]notifier.Channel{notifier.ChannelWebhook: wh}}, notifier.DeliverConfig{MaxInFlight: concurrency}, a.tel)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "bench notifier: redis %s, %d partitions, %d subscribers, %d stage copies, history %v, GOMAXPROCS %d\n",
		redacted(cfg.RedisURL), cfg.Partitions, subs, copies, withHistory, runtime.GOMAXPROCS(0))

	// Throughput: a backlog of requests, then the stage drains it.
	reqs := make([]notifier.Request, 0, 500)
	for i := 0; i < messages; i++ {
		reqs = append(reqs, notifier.Request{Flow: "bench", Event: "bench.tput", Subject: "item:" + strconv.Itoa(i),
			SubscriberID: ids[i%subs], Window: "w", Critical: true, Payload: json.RawMessage(`{"i":` + strconv.Itoa(i) + `}`)})
		if len(reqs) == cap(reqs) || i == messages-1 {
			if err := notifier.PublishRequests(ctx, a.pub, topic, reqs...); err != nil {
				return err
			}
			reqs = reqs[:0]
		}
	}
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	cpu0, rcpu0, allocs0 := processCPU(), redisCPU(ctx, a), allocated()
	start := time.Now()
	for range copies {
		r, err := stream.NewRunner(a.rdb, d.Stage(), a.tel)
		if err != nil {
			return err
		}
		wg.Go(func() { _ = r.Run(runCtx) })
	}
	if err := sink.waitFor(ctx, int64(messages), 10*time.Minute); err != nil {
		return err
	}
	elapsed := time.Since(start)
	cpu, rcpu, allocs := processCPU()-cpu0, redisCPU(ctx, a)-rcpu0, allocated().minus(allocs0)
	if *memProfile != "" {
		if err := writeHeapProfile(*memProfile); err != nil {
			return err
		}
	}
	perSec := float64(messages) / elapsed.Seconds()
	fmt.Fprintf(stdout, "throughput: %d deliveries in %s = %.0f deliveries/s, %d duplicates, %d connections [target ≥ %d/s: %s]\n",
		messages, elapsed.Round(time.Millisecond), perSec, sink.duplicates.Load(), sink.conns.Load(), targetDeliveriesPerSecond,
		verdictOf(perSec >= targetDeliveriesPerSecond))
	fmt.Fprintf(stdout, "cpu per delivery: %.1f µs in this process (stage, webhook client and sink), %.1f µs in Redis\n",
		float64(cpu.Microseconds())/float64(messages), float64(rcpu.Microseconds())/float64(messages))
	fmt.Fprintf(stdout, "allocations per delivery: %.0f (%.0f B) in this process\n",
		float64(allocs.objects)/float64(messages), float64(allocs.bytes)/float64(messages))

	// Latency at a fixed rate: publish → received by the sink.
	sink.reset()
	total := int(float64(rate) * dur.Seconds())
	tick := time.Millisecond * 10
	perTick := max(1, rate/100)
	t := time.NewTicker(tick)
	sent := 0
	for sent < total {
		<-t.C
		batch := make([]notifier.Request, 0, perTick)
		now := time.Now()
		for j := 0; j < perTick && sent < total; j++ {
			batch = append(batch, notifier.Request{Flow: "bench", Event: "bench.lat", Subject: "lat:" + strconv.Itoa(sent),
				SubscriberID: ids[sent%subs], Window: "w", Critical: true, ObservedAt: now})
			sent++
		}
		if err := notifier.PublishRequests(ctx, a.pub, topic, batch...); err != nil {
			t.Stop()
			return err
		}
	}
	t.Stop()
	if err := sink.waitFor(ctx, int64(total), time.Minute); err != nil {
		return err
	}
	lat := sink.latencies()
	fmt.Fprintf(stdout, "latency at %d requests/s for %s: %d delivered, p50 %s, p99 %s, max %s [target p99 ≤ %s: %s]\n",
		rate, dur, len(lat), pct(lat, 0.50), pct(lat, 0.99), pct(lat, 1), targetNotifierP99, verdictOf(pct(lat, 0.99) <= targetNotifierP99))
	return nil
}

// processCPU is the CPU time (user and system) this process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// allocations counts the heap allocations of this process so far.
type allocations struct{ objects, bytes uint64 }

func allocated() allocations {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return allocations{ms.Mallocs, ms.TotalAlloc}
}

func (a allocations) minus(b allocations) allocations {
	return allocations{a.objects - b.objects, a.bytes - b.bytes}
}

// writeHeapProfile writes the allocation profile (pprof's alloc_space and
// alloc_objects samples) to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// redisCPU is the CPU time Redis reports it used (INFO cpu), 0 when it
// cannot tell (a cluster, the embedded Redis).
func redisCPU(ctx context.Context, a *app) time.Duration {
	info, err := a.rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, _ := strconv.ParseFloat(v, 64)
			total += f
		}
	}
	return time.Duration(total * float64(time.Second))
}

func verdictOf(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := min(int(p*float64(len(d))), len(d)-1)
	return d[i].Round(10 * time.Microsecond)
}

// benchSink is the local webhook receiver of the bench: it counts
// deliveries and duplicates (by notification id) and, for requests with
// an observed_at, the latency from it.
type benchSink struct {
	srv        *http.Server
	url        string
	received   atomic.Int64
	duplicates atomic.Int64
	conns      atomic.Int64 // connections accepted
	mu         sync.Mutex
	seen       map[string]bool
	lat        []time.Duration
}

func newBenchSink() (*benchSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &benchSink{url: "http://" + ln.Addr().String(), seen: map[string]bool{}}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 5 * time.Second,
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				s.conns.Add(1)
			}
		}}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// sinkBuffers are the sink's request body buffers, reused.
var sinkBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// serve reads a notification's "id" and "observed_at" without decoding the
// whole body: the notifier writes them as plain JSON strings.
func (s *benchSink) serve(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	buf := sinkBuffers.Get().(*bytes.Buffer)
	buf.Reset()
	defer sinkBuffers.Put(buf)
	_, _ = buf.ReadFrom(io.LimitReader(r.Body, 1<<20))
	body := buf.Bytes()
	id := jsonString(body, `"id":"`)
	var observed time.Time
	if v := jsonString(body, `"observed_at":"`); v != "" {
		observed, _ = time.Parse(time.RFC3339Nano, v)
	}
	s.mu.Lock()
	if s.seen[id] {
		s.duplicates.Add(1)
	}
	s.seen[id] = true
	if !observed.IsZero() {
		s.lat = append(s.lat, now.Sub(observed))
	}
	s.mu.Unlock()
	s.received.Add(1)
	w.WriteHeader(http.StatusNoContent)
}

// jsonString returns the string after the first occurrence of prefix (a
// key and the opening quote) up to its closing quote; "" when absent.
func jsonString(body []byte, prefix string) string {
	i := bytes.Index(body, []byte(prefix))
	if i < 0 {
		return ""
	}
	rest := body[i+len(prefix):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return ""
	}
	return string(rest[:j])
}

func (s *benchSink) reset() {
	s.mu.Lock()
	s.lat = nil
	s.mu.Unlock()
	s.received.Store(0)
}

func (s *benchSink) latencies() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.lat)
	slices.Sort(out)
	return out
}

func (s *benchSink) waitFor(ctx context.Context, n int64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for s.received.Load() < n {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("bench notifier: %d of %d deliveries received before the deadline", s.received.Load(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

func (s *benchSink) close() { _ = s.srv.Close() }
