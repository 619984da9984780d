package collector_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/collector"
	"github.com/dropstream/dropstream/collector/simulator"
	"github.com/dropstream/dropstream/collector/simulator/simtest"
	"github.com/dropstream/dropstream/internal/egress/egresstest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// t0 is the fake clock's start: a whole second, so HTTP dates are exact.
var t0 = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)

// fakeClock is a Clock moved only by Advance.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	alarms []fakeAlarm
}

type fakeAlarm struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: t0} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Alarm(t time.Time) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if !t.After(c.now) {
		ch <- c.now
		return ch
	}
	c.alarms = append(c.alarms, fakeAlarm{at: t, ch: ch})
	return ch
}

// Advance moves the clock by d and fires the alarms it reaches.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.alarms[:0]
	for _, a := range c.alarms {
		if a.at.After(c.now) {
			kept = append(kept, a)
		} else {
			a.ch <- c.now
		}
	}
	c.alarms = kept
}

// Alarms returns the times of the pending alarms, sorted.
func (c *fakeClock) Alarms() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []time.Time
	for _, a := range c.alarms {
		out = append(out, a.at)
	}
	slices.SortFunc(out, time.Time.Compare)
	return out
}

// env is a collector wired to a simulator over HTTP and a miniredis.
type env struct {
	t       *testing.T
	rdb     *redis.Client
	sim     *simtest.Sim
	base    string
	clock   *fakeClock
	topics  avail.Topics
	tel     stream.Telemetry
	pub     *stream.Publisher
	c       *collector.Collector
	metrics *sdkmetric.ManualReader
}

func newRedis(t *testing.T) *redis.Client {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// newEnv starts a simulator and a collector on one partition (so the raw
// stream keeps publish order) with a fake clock. cfg's Clock and Telemetry
// are set by newEnv, and Burst defaults to 100 so that only tests asking
// for rate-limit waits (with Burst 1) see them.
func newEnv(t *testing.T, simCfg simulator.Config, cfg collector.CollectorConfig) *env {
	t.Helper()
	sim, err := simtest.New(simCfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	e := &env{t: t, rdb: newRedis(t), sim: sim, base: srv.URL, clock: newFakeClock(), topics: avail.NewTopics(1),
		metrics: sdkmetric.NewManualReader()}
	e.tel = stream.Telemetry{
		TracerProvider: sdktrace.NewTracerProvider(),
		MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(e.metrics)),
		Propagator:     propagation.TraceContext{},
		Logger:         slog.New(slog.DiscardHandler),
	}
	e.pub = stream.NewPublisher(e.rdb, e.tel)
	cfg.Clock, cfg.Telemetry = e.clock, e.tel
	if cfg.Egress == nil {
		cfg.Egress = egresstest.Loopback(t) // the simulator and startServer's servers
	}
	if cfg.Burst == 0 {
		cfg.Burst = 100 // no rate-limit waits unless a test asks for them
	}
	e.c, err = collector.NewCollector(e.topics, e.pub, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.c.Close() })
	return e
}

// source returns a valid source of the simulator with the given scopes.
func (e *env) source(id, prov string, scopes ...avail.Scope) collector.Source {
	return collector.Source{ID: id, Provider: prov, BaseURL: e.base, Scopes: scopes, RateLimit: 1000}
}

func (e *env) upsert(src collector.Source) {
	e.t.Helper()
	if err := e.c.Upsert(src); err != nil {
		e.t.Fatal(err)
	}
}

// messages returns the messages of every partition of topic in stream order.
func messages(t *testing.T, rdb redis.UniversalClient, topic stream.Topic) []*stream.Message {
	t.Helper()
	var out []*stream.Message
	for p := range topic.Partitions {
		xs, err := rdb.XRange(context.Background(), topic.Stream(p), "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range xs {
			m := &stream.Message{ID: x.ID, Stream: topic.Stream(p), Partition: p, Metadata: map[string]string{}}
			for k, v := range x.Values {
				s, _ := v.(string)
				switch k {
				case "key":
					m.Key = s
				case "type":
					m.Type = s
				case "payload":
					m.Payload = []byte(s)
				case stream.MetaTraceParent:
					m.TraceParent = s
				default:
					m.Metadata[k] = s
				}
			}
			out = append(out, m)
		}
	}
	return out
}

// decodeAll decodes the payloads of msgs as T.
func decodeAll[T any](t *testing.T, msgs []*stream.Message) []T {
	t.Helper()
	out := make([]T, 0, len(msgs))
	for _, m := range msgs {
		var v T
		if err := json.Unmarshal(m.Payload, &v); err != nil {
			t.Fatalf("message %s: %v", m.ID, err)
		}
		out = append(out, v)
	}
	return out
}

func (e *env) runs() []avail.RawRun {
	return decodeAll[avail.RawRun](e.t, messages(e.t, e.rdb, e.topics.Raw))
}

func (e *env) transitions() []avail.Transition {
	return decodeAll[avail.Transition](e.t, messages(e.t, e.rdb, e.topics.Transitions))
}

// pollAsync runs PollOnce in a goroutine and returns its result channel.
func (e *env) pollAsync(id string) <-chan error {
	done := make(chan error, 1)
	go func() { done <- e.c.PollOnce(context.Background(), id) }()
	return done
}

// waitAlarm waits until the clock has a pending alarm, and returns the
// earliest one.
func (e *env) waitAlarm() time.Time {
	e.t.Helper()
	var at time.Time
	waitFor(e.t, func() bool {
		a := e.clock.Alarms()
		if len(a) == 0 {
			return false
		}
		at = a[0]
		return true
	}, "a pending alarm")
	return at
}

// startServer serves h over HTTP for the test and returns its URL.
func startServer(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// waitFor polls cond until it holds, failing the test after 10s.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	testenv.WaitFor(t, 30*time.Second, cond, what)
}

func wait(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("PollOnce did not return")
		return nil
	}
}
