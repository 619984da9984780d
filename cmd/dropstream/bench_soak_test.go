package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

func TestParseSoakMetrics_figures(t *testing.T) {
	const full = `# TYPE go_goroutines gauge
go_goroutines 238
# TYPE go_gc_heap_live_bytes gauge
go_gc_heap_live_bytes 1.5e+07
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 6.2e+07
# TYPE dropstream_dlq_length gauge
dropstream_dlq_length{flow="x"} 3
`
	for _, tc := range []struct {
		name, text string
		want       soakSample
		wantErr    string
	}{
		{name: "all three", text: full, want: soakSample{RSS: 6.2e7, Heap: 1.5e7, Goroutines: 238}},
		{name: "live heap missing", text: strings.ReplaceAll(full, "go_gc_heap_live_bytes", "go_other"), wantErr: "no go_gc_heap_live_bytes"},
		{name: "not an exposition", text: "{not metrics", wantErr: "parse /metrics"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseSoakMetrics(strings.NewReader(tc.text))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestSoakRowOf_growthAndVerdict(t *testing.T) {
	at := func(m int, rss, heap, gor float64, keys int64) soakSample {
		return soakSample{At: time.Duration(m) * time.Minute, RSS: rss, Heap: heap, Goroutines: gor, Keys: keys}
	}
	for _, tc := range []struct {
		name        string
		keysBounded bool
		samples     []soakSample
		wantBase    time.Duration
		wantRSS     float64
		wantVerdict string
	}{
		{name: "flat after settle", keysBounded: true,
			samples:  []soakSample{at(5, 50, 10, 100, 10), at(30, 100, 20, 200, 1000), at(45, 104, 21, 205, 1050), at(60, 105, 21, 200, 1000)},
			wantBase: 30 * time.Minute, wantRSS: 0.05, wantVerdict: "ok"},
		{name: "growth before settle does not count", keysBounded: true,
			samples:  []soakSample{at(5, 10, 1, 10, 1), at(30, 100, 20, 200, 1000), at(60, 100, 20, 200, 1000)},
			wantBase: 30 * time.Minute, wantRSS: 0, wantVerdict: "ok"},
		{name: "heap and goroutines grow", keysBounded: true,
			samples:  []soakSample{at(30, 100, 20, 200, 1000), at(60, 109, 30, 300, 1000)},
			wantBase: 30 * time.Minute, wantRSS: 0.09, wantVerdict: "GREW: heap, goroutines"},
		{name: "run's keys grow by design", keysBounded: false,
			samples:  []soakSample{at(30, 100, 20, 200, 1000), at(60, 100, 20, 200, 5000)},
			wantBase: 30 * time.Minute, wantRSS: 0, wantVerdict: "ok"},
		{name: "demo's keys are judged", keysBounded: true,
			samples:  []soakSample{at(30, 100, 20, 200, 1000), at(60, 100, 20, 200, 5000)},
			wantBase: 30 * time.Minute, wantRSS: 0, wantVerdict: "GREW: keys"},
		{name: "settle between samples takes the one before", keysBounded: true,
			samples:  []soakSample{at(20, 100, 20, 200, 10), at(40, 200, 20, 200, 10), at(60, 200, 20, 200, 10)},
			wantBase: 20 * time.Minute, wantRSS: 1, wantVerdict: "GREW: rss"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := soakRowOf("p", tc.keysBounded, tc.samples, 30*time.Minute)
			if r.Base.At != tc.wantBase {
				t.Errorf("base at %s, want %s", r.Base.At, tc.wantBase)
			}
			if d := r.RSS - tc.wantRSS; d > 1e-9 || d < -1e-9 {
				t.Errorf("rss growth %v, want %v", r.RSS, tc.wantRSS)
			}
			if got := r.verdict(); got != tc.wantVerdict {
				t.Errorf("verdict %q, want %q", got, tc.wantVerdict)
			}
			var b bytes.Buffer
			writeSoakTable(&b, []soakRow{r}, 30*time.Minute)
			if !strings.Contains(b.String(), "| p ") || !strings.Contains(b.String(), tc.wantVerdict) {
				t.Errorf("table lacks the row or its verdict:\n%s", b.String())
			}
		})
	}
}

func TestEmbeddedRedisURL_fromDemoLine(t *testing.T) {
	for _, tc := range []struct {
		line, want string
		ok         bool
	}{
		{"dropstream demo: embedded Redis at 127.0.0.1:4000 (redis-cli -u redis://:pw@127.0.0.1:4000/0)", "redis://:pw@127.0.0.1:4000/0", true},
		{"dropstream demo: API on 127.0.0.1:8080 — try /v1/availability", "", false},
		{"dropstream demo: embedded Redis at 127.0.0.1:4000 (redis-cli -u )", "", false},
	} {
		got, ok := embeddedRedisURL(tc.line)
		if got != tc.want || ok != tc.ok {
			t.Errorf("embeddedRedisURL(%q) = %q, %v; want %q, %v", tc.line, got, ok, tc.want, tc.ok)
		}
	}
}

func TestSoakConfig_Validate(t *testing.T) {
	ok := soakConfig{Duration: time.Hour, Every: 5 * time.Minute, Load: 4}
	for _, tc := range []struct {
		name    string
		change  func(*soakConfig)
		wantErr string
	}{
		{name: "defaults", change: func(*soakConfig) {}},
		{name: "one period only", change: func(c *soakConfig) { c.Duration = 5 * time.Minute }, wantErr: "two sampling periods"},
		{name: "settle at the end", change: func(c *soakConfig) { c.Settle = time.Hour }, wantErr: "settle"},
		{name: "load over the write limit", change: func(c *soakConfig) { c.Load = 60 }, wantErr: "write limit"},
		{name: "no load", change: func(c *soakConfig) { c.Load = 0 }, wantErr: "load"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.change(&c)
			err := c.Validate()
			if (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Validate() = %v, want error with %q", err, tc.wantErr)
			}
		})
	}
	if got := ok.settle(); got != 30*time.Minute {
		t.Errorf("settle of an hour = %s, want 30m", got)
	}
}

func TestValidatePprofAddr_loopbackOnly(t *testing.T) {
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"", true}, {"127.0.0.1:6060", true}, {"[::1]:6060", true}, {"localhost:6060", true},
		{":6060", false}, {"0.0.0.0:6060", false}, {"10.0.0.1:6060", false}, {"example.com:6060", false}, {"6060", false},
	} {
		if err := validatePprofAddr(tc.addr); (err == nil) != tc.ok {
			t.Errorf("validatePprofAddr(%q) = %v, want ok %v", tc.addr, err, tc.ok)
		}
	}
}

// TestServePprof_heapProfile: the pprof listener serves a heap profile,
// and nothing once stopped.
func TestServePprof_heapProfile(t *testing.T) {
	port, err := freeLoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	stop, err := servePprof(addr, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+addr+"/debug/pprof/heap?gc=1", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// A gzipped protobuf profile starts with the gzip magic bytes.
	if resp.StatusCode != http.StatusOK || len(body) < 2 || body[0] != 0x1f || body[1] != 0x8b {
		t.Fatalf("GET heap: %s, %d bytes, want a gzipped profile", resp.Status, len(body))
	}
	stop()
	if resp, err := http.Get("http://" + addr + "/debug/pprof/"); err == nil {
		resp.Body.Close()
		t.Fatal("pprof still served after stop")
	}
}

func TestSoakFamilyOf_idsAndPartitionsStarred(t *testing.T) {
	for _, tc := range []struct{ key, want string }{
		{"ds:{avail.3}:entity:v1:42", "ds:{avail.*}:entity:*:*"},
		{"ds:{checkout.7}:co:item:0a1b2c3d4e5f60718293a4b5", "ds:{checkout.*}:co:item:*"},
		{"ds:{comic-subs}:comic:patterns", "ds:{comic-subs}:comic:patterns"},
		{"ds:{feed.0}:feed:f1:coll:demo-every-3:3:i", "ds:{feed.*}:feed:*:coll:*:*:i"},
		{"ds:sources", "ds:sources"},
	} {
		if got := soakFamilyOf(tc.key); got != tc.want {
			t.Errorf("soakFamilyOf(%q) = %q, want %q", tc.key, got, tc.want)
		}
	}
}

func TestSoakFamilies_countsKeysElementsAndNoTTL(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	n := soakBatch + 100 // more than one batch
	for i := range n {
		k := fmt.Sprintf("ds:{checkout.%d}:co:item:%x", i%8, 1_000_000+i)
		mr.HSet(k, "stock", "1", "price", "2")
		if i%2 == 0 {
			mr.SetTTL(k, time.Minute)
		}
	}
	mr.Set("ds:sources", "abc")
	fams, err := soakFamilies(context.Background(), rdb)
	if err != nil {
		t.Fatal(err)
	}
	want := []soakFamily{
		{Name: "ds:{checkout.*}:co:item:*", Type: "hash", Keys: int64(n), Elements: int64(2 * n), NoTTL: int64(n / 2)},
		{Name: "ds:sources", Type: "string", Keys: 1, Elements: 3, NoTTL: 1},
	}
	if !slices.Equal(fams, want) {
		t.Errorf("families %+v, want %+v", fams, want)
	}
}

func TestRSSPeak_takesTheLargestReadOfThePeriod(t *testing.T) {
	var w rssPeak
	for _, tc := range []struct {
		name  string
		reads []float64
		at    float64 // the sample's own read
		want  float64
	}{
		{name: "a read between samples above the sample's", reads: []float64{100, 300, 200}, at: 150, want: 300},
		{name: "the sample's read the largest", reads: []float64{100}, at: 250, want: 250},
		{name: "a new period forgets the last one's peak", at: 120, want: 120},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range tc.reads {
				w.observe(r)
			}
			if got := w.take(tc.at); got != tc.want {
				t.Errorf("take(%v) = %v, want %v", tc.at, got, tc.want)
			}
		})
	}
}
