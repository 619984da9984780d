package notifierbench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

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
