package notifierbench

import (
	"bytes"
	"context"
	"fmt"
	"github.com/dropstream/dropstream/internal/progress"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// benchSink counts deliveries, duplicates and latency from observed_at.
// It is a fasthttp server to leave the CPU to the notifier: net/http's
// cost 12–16 µs and 31 allocations more per delivery (BENCHMARKS.md).
type benchSink struct {
	srv        *fasthttp.Server
	ln         net.Listener
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
	s.ln = countingListener{Listener: ln, accepted: &s.conns}
	s.srv = &fasthttp.Server{Handler: s.serve, ReadTimeout: 5 * time.Second, MaxRequestBodySize: 1 << 20,
		NoDefaultServerHeader: true, NoDefaultDate: true, NoDefaultContentType: true}
	go func() { _ = s.srv.Serve(s.ln) }()
	return s, nil
}

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	accepted *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// serve reads "id" and "observed_at" without decoding the body.
func (s *benchSink) serve(ctx *fasthttp.RequestCtx) {
	now := time.Now()
	body := ctx.PostBody()
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
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}

// jsonString returns the string after prefix up to its quote; "" if absent.
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

func (s *benchSink) waitFor(ctx context.Context, n int64, timeout time.Duration, ph *progress.Phase) error {
	deadline := time.Now().Add(timeout)
	for s.received.Load() < n {
		ph.Set(s.received.Load())
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("bench notifier: %d of %d deliveries received before the deadline", s.received.Load(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	ph.Set(n)
	ph.Done("")
	return nil
}

func (s *benchSink) close() { _ = s.srv.Shutdown() }
