package benchstat

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// LoadArgs are the arguments of the binary that run a Load read as JSON on
// stdin and print its LoadResult as JSON: the load process of RunBy.
var LoadArgs = []string{"bench", "load"}

// Load is one phase of HTTP load. Benches run it in a process of their own
// (RunBy), so the clients' CPU stays out of the figure of the process
// under test.
type Load struct {
	Method      string        `json:"method"`
	URL         string        `json:"url"`
	Connections int           `json:"connections"`
	Duration    time.Duration `json:"duration"`
	// Rate is the requests per second of a fixed-rate phase; 0 sends as
	// fast as the connections allow (saturation).
	Rate int `json:"rate"`
	// IDs, when set, are substituted in turn for "{id}" in URL, and the
	// phase also ends when they run out.
	IDs []int `json:"ids,omitempty"`
}

// LoadResult is what a load phase measured.
type LoadResult struct {
	Requests int            `json:"requests"`
	Seconds  float64        `json:"seconds"`
	Status   map[string]int `json:"status"` // by HTTP status, "error" for no answer
	// Latencies are from each request's due time, so a server that falls
	// behind a fixed rate shows it.
	Latencies
	// Answers are the HTTP status of each of IDs (0: not sent, -1: no
	// answer).
	Answers []int `json:"answers,omitempty"`
	// CPU is the load process's own CPU over the phase.
	CPU time.Duration `json:"cpu"`
}

// Validate reports a phase out of range.
func (l Load) Validate() error {
	if l.Connections < 1 || l.Connections > 8192 || l.Duration <= 0 || l.Rate < 0 {
		return fmt.Errorf("benchstat: load: connections %d (1..8192), duration %s or rate %d out of range", l.Connections, l.Duration, l.Rate)
	}
	return nil
}

// PerSecond is the phase's rate of answered requests.
func (r LoadResult) PerSecond() float64 {
	if r.Seconds <= 0 {
		return 0
	}
	return float64(r.Requests-r.Status["error"]) / r.Seconds
}

// StatusLine lists a result's answers by status, most first.
func (r LoadResult) StatusLine() string {
	keys := slices.Collect(maps.Keys(r.Status))
	slices.SortFunc(keys, func(a, b string) int { return r.Status[b] - r.Status[a] })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s × %d", k, r.Status[k])
	}
	return strings.Join(parts, ", ")
}

// RunBy runs l in a process of its own, the binary self starts with
// LoadArgs, and reads its result.
func (l Load) RunBy(ctx context.Context, self func(args ...string) *exec.Cmd) (LoadResult, error) {
	spec, err := json.Marshal(l)
	if err != nil {
		return LoadResult{}, err
	}
	cmd := self(LoadArgs...)
	cmd.Stdin = bytes.NewReader(spec)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return LoadResult{}, fmt.Errorf("load process: %w: %s", err, stderr.String())
	}
	var res LoadResult
	if err := json.Unmarshal(out, &res); err != nil {
		return LoadResult{}, fmt.Errorf("load process answered %.200q: %w", out, err)
	}
	return res, ctx.Err()
}

// Run sends the phase's requests over keep-alive connections.
func (l Load) Run(ctx context.Context) LoadResult {
	// fasthttp's client: it costs the load process a fraction of what
	// net/http's does, so the two cores go to the server as with wrk
	// (BENCHMARKS.md, "The availability list served again while unchanged").
	client := &fasthttp.Client{MaxConnsPerHost: l.Connections, ReadTimeout: time.Minute, WriteTimeout: time.Minute,
		MaxIdemponentCallAttempts: 1}
	defer client.CloseIdleConnections()
	cpu := ProcessCPU()
	start := time.Now()
	deadline := start.Add(l.Duration)
	var next atomic.Int64
	var mu sync.Mutex
	res := LoadResult{Status: map[string]int{}}
	if l.IDs != nil {
		res.Answers = make([]int, len(l.IDs))
	}
	var latencies []time.Duration
	var wg sync.WaitGroup
	for range l.Connections {
		wg.Go(func() {
			status := map[string]int{}
			var lat []time.Duration
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				due := time.Now()
				if l.Rate > 0 {
					due = start.Add(time.Duration(i) * time.Second / time.Duration(l.Rate))
					time.Sleep(time.Until(due)) // pacing of the fixed rate
				}
				if !due.Before(deadline) || (l.IDs != nil && i >= len(l.IDs)) {
					break
				}
				url := l.URL
				if l.IDs != nil {
					url = strings.ReplaceAll(url, "{id}", strconv.Itoa(l.IDs[i]))
				}
				code := sendFast(client, l.Method, url)
				if l.IDs != nil {
					res.Answers[i] = code // each worker writes its own indexes
				}
				s := "error"
				if code > 0 {
					s = strconv.Itoa(code)
				}
				status[s]++
				lat = append(lat, time.Since(due))
			}
			mu.Lock()
			defer mu.Unlock()
			for k, n := range status {
				res.Status[k] += n
				res.Requests += n
			}
			latencies = append(latencies, lat...)
		})
	}
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	res.CPU = ProcessCPU() - cpu
	res.Latencies = Summarize(latencies)
	return res
}

// Helper is a bench's helper process (a feed server, a webhook sink): it
// prints its base URL as the first line of its stdout, and ends when its
// stdin does.
type Helper struct {
	URL string
	In  io.WriteCloser
	Out *bufio.Reader
	cmd *exec.Cmd
}

// StartHelper starts cmd and reads its URL; who prefixes the errors.
func StartHelper(cmd *exec.Cmd, who string) (*Helper, error) {
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", who, err)
	}
	h := &Helper{In: in, Out: bufio.NewReader(out), cmd: cmd}
	line, err := h.Out.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "http://") {
		h.Close()
		return nil, fmt.Errorf("%s answered %q: %v", who, line, err)
	}
	h.URL = strings.TrimSpace(line)
	return h, nil
}

// Close ends the process: its stdin ends.
func (h *Helper) Close() { _ = h.In.Close(); _ = h.cmd.Wait() }

// sendFast makes one request and returns its status, -1 without one.
func sendFast(client *fasthttp.Client, method, url string) int {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(method)
	req.SetRequestURI(url)
	if err := client.Do(req, resp); err != nil {
		return -1
	}
	return resp.StatusCode()
}

// Send makes one request and returns its status, -1 without one.
func Send(ctx context.Context, client *http.Client, method, url string) int {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return -1
	}
	resp, err := client.Do(req)
	if err != nil {
		return -1
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}
