package notifierbench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// SinkArgs are the arguments of the binary that run ServeSink: the bench's
// webhook sink, in a process of its own so its CPU stays out of the
// notifier's figure.
var SinkArgs = []string{"bench", "notifier-sink"}

// benchSink counts deliveries, duplicates and latency from observed_at.
// It is a fasthttp server: net/http's cost 12–16 µs and 31 allocations
// more per delivery (BENCHMARKS.md).
type benchSink struct {
	srv        *fasthttp.Server
	url        string
	received   atomic.Int64
	duplicates atomic.Int64
	conns      atomic.Int64 // connections accepted
	mu         sync.Mutex
	seen       map[string]bool
	lat        []time.Duration
}

// sinkStats are a sink's counts since its last reset (duplicates and
// connections since its start).
type sinkStats struct {
	Received    int64 `json:"received"`
	Duplicates  int64 `json:"duplicates"`
	Connections int64 `json:"connections"`
}

// sinkAnswer is the sink process's answer to one command: its counts, and
// the latencies for "latencies".
type sinkAnswer struct {
	sinkStats
	Latencies []time.Duration `json:"latencies,omitempty"`
}

// ServeSink serves the webhook sink on a free loopback port, prints its
// base URL as one line to stdout, then answers each command line of stdin
// with one JSON line (sinkAnswer): "stats", "reset" (latencies and the
// received count start over) or "latencies" (sorted). It ends with stdin,
// or at the next command once ctx is done.
func ServeSink(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("bench notifier-sink", flag.ContinueOnError)
	if err := fs.Parse(args); err != nil {
		return err
	}
	s, err := newBenchSink()
	if err != nil {
		return err
	}
	defer s.close()
	if _, err := fmt.Fprintln(stdout, s.url); err != nil {
		return err
	}
	sc := bufio.NewScanner(stdin)
	enc := json.NewEncoder(stdout)
	for ctx.Err() == nil && sc.Scan() {
		var a sinkAnswer
		switch cmd := sc.Text(); cmd {
		case "reset":
			s.reset()
		case "latencies":
			a.Latencies = s.latencies()
		case "stats":
		default:
			return fmt.Errorf("bench notifier-sink: unknown command %q", cmd)
		}
		a.sinkStats = sinkStats{Received: s.received.Load(), Duplicates: s.duplicates.Load(), Connections: s.conns.Load()}
		if err := enc.Encode(a); err != nil {
			return err
		}
	}
	return nil
}

func newBenchSink() (*benchSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench notifier-sink: %w", err)
	}
	s := &benchSink{url: "http://" + ln.Addr().String(), seen: map[string]bool{}}
	s.srv = &fasthttp.Server{Handler: s.serve, ReadTimeout: 5 * time.Second, MaxRequestBodySize: 1 << 20,
		NoDefaultServerHeader: true, NoDefaultDate: true, NoDefaultContentType: true,
		ConnState: func(_ net.Conn, st fasthttp.ConnState) {
			if st == fasthttp.StateNew {
				s.conns.Add(1)
			}
		}}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
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
	_, rest, found := bytes.Cut(body, []byte(prefix))
	v, _, closed := bytes.Cut(rest, []byte{'"'})
	if !found || !closed {
		return ""
	}
	return string(v)
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

func (s *benchSink) close() { _ = s.srv.Shutdown() }
