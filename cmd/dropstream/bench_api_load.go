package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// apiLoad is one phase of `bench api`'s load, run in a process of its own
// so its CPU stays out of the server's figure.
type apiLoad struct {
	Method      string        `json:"method"`
	URL         string        `json:"url"`
	Connections int           `json:"connections"`
	Duration    time.Duration `json:"duration"`
	// Rate is the requests per second of a fixed-rate phase; 0 sends as
	// fast as the connections allow (saturation).
	Rate int `json:"rate"`
}

// apiLoadResult is what a load phase measured.
type apiLoadResult struct {
	Requests int            `json:"requests"`
	Seconds  float64        `json:"seconds"`
	Status   map[string]int `json:"status"` // by HTTP status, "error" for no answer
	// P50 and P99 are latencies from each request's due time, so a
	// server that falls behind a fixed rate shows it.
	P50 time.Duration `json:"p50"`
	P99 time.Duration `json:"p99"`
}

// PerSecond is the phase's rate of answered requests.
func (r apiLoadResult) PerSecond() float64 {
	if r.Seconds <= 0 {
		return 0
	}
	return float64(r.Requests-r.Status["error"]) / r.Seconds
}

// runAPILoad is the hidden target `bench api-load --spec JSON`: it runs one
// load phase and prints its apiLoadResult as JSON.
func runAPILoad(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench api-load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	spec := fs.String("spec", "", "the phase, as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var l apiLoad
	if err := json.Unmarshal([]byte(*spec), &l); err != nil {
		return fmt.Errorf("bench api-load: --spec: %w", err)
	}
	if l.Connections < 1 || l.Connections > 4096 || l.Duration <= 0 || l.Rate < 0 {
		return fmt.Errorf("bench api-load: connections %d (1..4096), duration %s or rate %d out of range", l.Connections, l.Duration, l.Rate)
	}
	return json.NewEncoder(stdout).Encode(l.run(ctx))
}

// run sends the phase's requests over keep-alive connections.
func (l apiLoad) run(ctx context.Context) apiLoadResult {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		MaxIdleConns: l.Connections, MaxIdleConnsPerHost: l.Connections, MaxConnsPerHost: l.Connections}}
	defer client.CloseIdleConnections()
	start := time.Now()
	deadline := start.Add(l.Duration)
	var next atomic.Int64
	var mu sync.Mutex
	res := apiLoadResult{Status: map[string]int{}}
	var latencies []time.Duration
	var wg sync.WaitGroup
	for range l.Connections {
		wg.Go(func() {
			status := map[string]int{}
			var lat []time.Duration
			for ctx.Err() == nil {
				due := time.Now()
				if l.Rate > 0 {
					i := next.Add(1) - 1
					due = start.Add(time.Duration(i) * time.Second / time.Duration(l.Rate))
					time.Sleep(time.Until(due)) // pacing of the fixed rate
				}
				if !due.Before(deadline) {
					break
				}
				status[l.send(ctx, client)]++
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
	slices.Sort(latencies)
	if n := len(latencies); n > 0 {
		res.P50, res.P99 = latencies[n/2], latencies[min(n*99/100, n-1)]
	}
	return res
}

// send makes one request and returns its status, "error" without one.
func (l apiLoad) send(ctx context.Context, client *http.Client) string {
	req, err := http.NewRequestWithContext(ctx, l.Method, l.URL, nil)
	if err != nil {
		return "error"
	}
	resp, err := client.Do(req)
	if err != nil {
		return "error"
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return strconv.Itoa(resp.StatusCode)
}

// statusLine lists a result's answers by status, most first.
func (r apiLoadResult) statusLine() string {
	keys := slices.Collect(maps.Keys(r.Status))
	slices.SortFunc(keys, func(a, b string) int { return r.Status[b] - r.Status[a] })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s × %d", k, r.Status[k])
	}
	return strings.Join(parts, ", ")
}
