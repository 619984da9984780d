package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/internal/testenv"
)

// collectorSeries returns the series (name and labels) of the collector's
// metric families for provider on the process's /metrics (the demo's own
// sources, of another provider, come and go on their own clock).
func collectorSeries(t *testing.T, base, provider string) map[string]bool {
	t.Helper()
	status, body := get(t, base+"/metrics")
	if status != http.StatusOK {
		t.Fatalf("/metrics: %d", status)
	}
	series := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "dropstream_collector_") && strings.Contains(line, `provider="`+provider+`"`) {
			series[line[:strings.LastIndexByte(line, ' ')]] = true
		}
	}
	return series
}

// send sends a JSON request and returns its status.
func send(t *testing.T, method, url, body string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// Sources are client-chosen ids: creating, polling and deleting 200 of
// them adds no series to /metrics (labels come from bounded sets only).
func TestMetricLabels_sourcesCreatedAndDeletedAddNoSeries(t *testing.T) {
	clearEnv(t)
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	base := "http://" + addr
	demo := startDispatch(t, "demo", "--api-addr", addr, "--tick", "1h", "--interval", "1h")
	demo.waitFor(t, 60*time.Second, func() bool {
		status, _ := get(t, base+"/readyz")
		return status == http.StatusOK
	}, "the demo ready")

	// Every poll of these sources fails (.invalid never resolves): a
	// failure is what used to add a series per source.
	source := func(id string) string {
		return fmt.Sprintf(`{"id":%q,"provider":"resy","base_url":"https://source.invalid","interval":"1s",
			"scopes":[{"venue":"1","date":"2026-12-24","party_size":2}]}`, id)
	}
	polled := func(id string) bool {
		status, body := get(t, base+"/v1/sources/"+id)
		var d struct {
			Health *struct {
				ConsecutiveFailures int `json:"consecutive_failures"`
			} `json:"health"`
		}
		return status == http.StatusOK && json.Unmarshal(body, &d) == nil && d.Health != nil && d.Health.ConsecutiveFailures > 0
	}
	cycle := func(ids []string) {
		for _, id := range ids {
			if status := send(t, http.MethodPost, base+"/v1/sources", source(id)); status != http.StatusCreated {
				t.Fatalf("create source %s: %d", id, status)
			}
		}
		for _, id := range ids {
			demo.waitFor(t, 2*time.Minute, func() bool { return polled(id) }, "a failed poll of "+id)
		}
		for _, id := range ids {
			if status := send(t, http.MethodDelete, base+"/v1/sources/"+id, ""); status != http.StatusNoContent {
				t.Fatalf("delete source %s: %d", id, status)
			}
		}
	}

	cycle([]string{"first"})
	before := collectorSeries(t, base, "resy")
	if len(before) == 0 {
		t.Fatal("no collector series after a source was polled")
	}
	// In batches below the per-tenant cap of sources (100).
	for batch := range 4 {
		ids := make([]string, 50)
		for i := range ids {
			ids[i] = fmt.Sprintf("src-%d-%d", batch, i)
		}
		cycle(ids)
	}
	after := collectorSeries(t, base, "resy")
	for s := range after {
		if !before[s] || strings.Contains(s, "src-") {
			t.Errorf("a series that 200 sources added: %s", s)
		}
	}
	if len(after) != len(before) {
		t.Fatalf("collector series: %d after 200 sources came and went, %d before", len(after), len(before))
	}
}
