package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier/history"
)

// envScreenshots, when set, makes the browser test write the console's
// screenshots under docs/.
const envScreenshots = "DROPSTREAM_TEST_SCREENSHOTS"

// browser starts a headless Chromium with a fresh profile and returns a
// tab's context, and the errors the pages report (console errors,
// uncaught exceptions, script and security log entries).
func browser(t *testing.T) (context.Context, func() []string) {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(testenv.Chromium(t)),
		chromedp.Flag("headless", true), chromedp.Flag("no-sandbox", true), chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true), chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1600, 1000),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	var mu sync.Mutex
	var errs []string
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			// Network entries are the answers the page expects (a 401
			// before the key is given); errors of scripts, exceptions and
			// security entries (a CSP violation) are faults.
			if (m.Type == chromedp.ConsoleError && m.Source != "network") || m.IsException() {
				mu.Lock()
				errs = append(errs, m.String())
				mu.Unlock()
			}
		}
	}()
	return ctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(errs)
	}
}

// run runs browser actions with a deadline.
func run(t *testing.T, ctx context.Context, timeout time.Duration, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer dcancel()
		page, _ := chromedp.Run(dctx, chromedp.Evaluate[string](`document.body.innerText.slice(0, 2000)`))
		t.Fatalf("%s: %v\npage:\n%s", what, err, page)
	}
}

// eval evaluates a JavaScript expression with a deadline.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// login opens the console and gives it key.
func login(t *testing.T, ctx context.Context, base, key string) {
	t.Helper()
	run(t, ctx, 30*time.Second, "log in",
		chromedp.Navigate(base+"/console"),
		chromedp.WaitVisible(chromedp.CSS("#login input#key")),
		chromedp.SendKeys(chromedp.CSS("#key"), key),
		chromedp.Click(chromedp.CSS(`#login button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("#stages tbody tr[data-stage]")))
}

// graphStages returns the stage names `dropstream graph --format json`
// lists.
func graphStages(t *testing.T) []string {
	t.Helper()
	var out bytes.Buffer
	if err := dispatch(context.Background(), []string{"graph", "--format", "json"}, &out, &out); err != nil {
		t.Fatalf("graph: %v", err)
	}
	var g struct {
		Flows []struct {
			Stages []struct{ Name string }
		}
	}
	if err := json.Unmarshal(out.Bytes(), &g); err != nil {
		t.Fatalf("graph json: %v\n%s", err, out.String())
	}
	var names []string
	for _, f := range g.Flows {
		for _, s := range f.Stages {
			names = append(names, s.Name)
		}
	}
	slices.Sort(names)
	return names
}

// addDeadLetter writes a dead letter of notify.history the way the
// runtime records one, and returns its ref.
func addDeadLetter(t *testing.T, rdb redis.UniversalClient, payload string) string {
	t.Helper()
	topic := history.Topic(8)
	id, err := rdb.XAdd(t.Context(), &redis.XAddArgs{Stream: topic.DeadLetterStream(0), Values: []any{
		"key", "n_console", "type", history.TypeRecords, "payload", payload,
		"dlq.reason", "permanent: the console test put it here", "dlq.stage", "notifier-history", "dlq.group", "notifier-history",
		"dlq.attempts", "3", "dlq.origin_id", "1-1", "dlq.at", time.Now().UTC().Format(time.RFC3339Nano)}}).Result()
	if err != nil {
		t.Fatal(err)
	}
	return "0/" + id
}

func TestConsole_inABrowser(t *testing.T) {
	clearEnv(t)
	t.Setenv("DROPSTREAM_CONSOLE_SAMPLE_INTERVAL", "1s")
	redisURL := testenv.RedisURL(t)
	rdb := testenv.Dial(t, redisURL)
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	base := "http://" + addr
	demo := startDispatch(t, "demo", "--api-addr", addr, "--redis-url", redisURL, "--tick", "500ms", "--interval", "1s",
		"--api-keys", "console-admin-key:admin;console-read-key:read", "--jaeger-ui-url", "http://jaeger.example:16686")
	demo.waitFor(t, 60*time.Second, func() bool {
		status, _ := get(t, base+"/console")
		return status == http.StatusOK
	}, "the console")
	ctx, pageErrors := browser(t)
	login(t, ctx, base, "console-admin-key")

	t.Run("the graph shows every registered stage", func(t *testing.T) {
		want := graphStages(t)
		got := eval[[]string](t, ctx, `[...document.querySelectorAll("#graph g[data-stage]")].map(g => g.dataset.stage).sort()`)
		if !slices.Equal(got, want) {
			t.Errorf("graph stages %v, want %v", got, want)
		}
	})

	t.Run("pause and resume are offered only with the stage controls", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, base+"/v1/admin/stages", nil)
		req.Header.Set("Authorization", "Bearer console-admin-key")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		buttons := eval[int](t, ctx, `document.querySelectorAll("#stages button.act").length`)
		if controls := resp.StatusCode == http.StatusOK; controls != (buttons > 0) {
			t.Errorf("GET /v1/admin/stages = %d and the page offers %d pause/resume buttons", resp.StatusCode, buttons)
		}
	})

	t.Run("the figures move while the pipeline runs", func(t *testing.T) {
		read := func() (string, float64) {
			v := eval[struct {
				Text string
				Sum  float64
			}](t, ctx, `(() => {
				const f = [...document.querySelectorAll("#graph g[data-stage] .f1, #graph g[data-stage] .f2")].map(e => e.textContent).join("|");
				const sum = [...document.querySelectorAll("#stages td.throughput")].reduce((a, td) => a + Number(td.textContent), 0);
				return {Text: f, Sum: sum};
			})()`)
			return v.Text, v.Sum
		}
		first, _ := read()
		testenv.WaitFor(t, 30*time.Second, func() bool {
			now, sum := read()
			return now != first && sum > 0
		}, "the graph's figures change and some stage reads messages")
	})

	t.Run("the graph fits the window and zooms", func(t *testing.T) {
		fit := `(() => { const r = document.querySelector("#graph").getBoundingClientRect(); return r.width <= document.documentElement.clientWidth && r.height <= innerHeight; })()`
		if !eval[bool](t, ctx, fit) {
			t.Errorf("the graph overflows the window")
		}
		box := `document.querySelector("#graph").viewBox.baseVal.width`
		full := eval[float64](t, ctx, box)
		run(t, ctx, 10*time.Second, "zoom in", chromedp.Click(chromedp.CSS(`#zoom button[data-z="in"]`)))
		if in := eval[float64](t, ctx, box); in >= full {
			t.Errorf("zoomed in, the graph shows %v units across, want fewer than %v", in, full)
		}
		run(t, ctx, 10*time.Second, "fit", chromedp.Click(chromedp.CSS(`#zoom button[data-z="fit"]`)))
		if got := eval[float64](t, ctx, box); got != full {
			t.Errorf("fit shows %v units across, want %v", got, full)
		}
	})

	t.Run("a stage's chart has points after three samples", func(t *testing.T) {
		run(t, ctx, 30*time.Second, "the charts",
			chromedp.Click(chromedp.CSS(`#tabs button[data-tab="charts"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#chartgrid .chart[data-stage] svg.spark.throughput`)))
		testenv.WaitFor(t, 30*time.Second, func() bool {
			return eval[int](t, ctx, `Math.max(0, ...[...document.querySelectorAll("#chartgrid svg.spark.throughput polyline")].map(p => p.points.numberOfItems))`) >= 3
		}, "a throughput chart with three points")
		labels := eval[string](t, ctx, `document.querySelector("#chartgrid .chart").textContent`)
		if !strings.Contains(labels, "p99 (this process)") {
			t.Errorf("a chart's labels %q: want the p99 labelled as this process's", labels)
		}
	})

	t.Run("a trace opens as a waterfall", func(t *testing.T) {
		run(t, ctx, 30*time.Second, "open a trace",
			chromedp.Click(chromedp.CSS(`#tabs button[data-tab="traces"]`)),
			chromedp.WaitVisible(chromedp.CSS("#tracelist li")),
			chromedp.Click(chromedp.CSS("#tracelist li")),
			chromedp.WaitVisible(chromedp.CSS("#waterfall .row .bar span")),
			chromedp.WaitReady(chromedp.CSS(`#waterfall a[href^="http://jaeger.example:16686/trace/"]`)))
	})

	t.Run("the availability board counts open slots per venue", func(t *testing.T) {
		run(t, ctx, 30*time.Second, "the board",
			chromedp.Click(chromedp.CSS(`#tabs button[data-tab="avail"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#venues tbody tr[data-venue] td.open`)),
			chromedp.WaitReady(chromedp.CSS(`#boardchart[data-minutes="15"] rect.opened`)))
		testenv.WaitFor(t, 10*time.Second, func() bool {
			return eval[int](t, ctx, `[...document.querySelectorAll("#venues td.open")].reduce((a, td) => a + Number(td.textContent), 0)`) > 0
		}, "open slots on the board")
		if note := eval[string](t, ctx, `document.querySelector("#sessionsnote").textContent`); !strings.Contains(note, "ClickHouse") {
			t.Errorf("sessions note %q: want it to say sessions need ClickHouse", note)
		}
	})

	t.Run("a notification shows its cause and why", func(t *testing.T) {
		run(t, ctx, 60*time.Second, "a notification with its cause",
			chromedp.Click(chromedp.CSS(`#tabs button[data-tab="events"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#eventlist li[data-kind="notification"] button.why`)))
		if list := eval[string](t, ctx, `document.querySelector("#eventlist").textContent`); strings.Contains(list, "[object") {
			t.Errorf("the events list shows an unrendered value: %.300s", list)
		}
		chips := eval[[]string](t, ctx, `[...document.querySelectorAll('#eventlist li[data-kind="notification"]')][0].querySelectorAll(".chip").values().map(c => c.textContent).toArray()`)
		if len(chips) != 2 || !strings.HasPrefix(chips[0], "avail event ") || !strings.HasPrefix(chips[1], "run ") {
			t.Errorf("a notification's causes %q, want its availability event and its run", chips)
		}
		run(t, ctx, 30*time.Second, "why",
			chromedp.Click(chromedp.CSS(`#eventlist li[data-kind="notification"] button.why`)),
			chromedp.WaitVisible(chromedp.CSS(`#why a.trace`)))
		why := eval[string](t, ctx, `document.querySelector("#why").textContent`)
		if !strings.Contains(why, "← transition ") || !strings.Contains(why, "← run ") || strings.Contains(why, "[object") {
			t.Errorf("why %q: want the transition and the run", why)
		}
	})

	t.Run("replaying a dead letter puts it back on its stream", func(t *testing.T) {
		payload := `[{"id":"n_console_replay","status":"sent"}]`
		ref := addDeadLetter(t, rdb, payload)
		run(t, ctx, 30*time.Second, "replay from the page",
			chromedp.Click(chromedp.CSS(`#tabs button[data-tab="dead"]`)),
			chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector("#dltopic"); s.value = "notify.history"; s.dispatchEvent(new Event("change")); })()`),
			chromedp.WaitVisible(chromedp.CSS(`#dltable tr[data-ref="`+ref+`"] button.replay`)),
			chromedp.Click(chromedp.CSS(`#dltable tr[data-ref="`+ref+`"] button.replay`)))
		topic := history.Topic(8)
		testenv.WaitFor(t, 10*time.Second, func() bool {
			n, err := rdb.XLen(t.Context(), topic.DeadLetterStream(0)).Result()
			if err != nil || n != 0 {
				return false
			}
			xs, _ := rdb.XRevRangeN(t.Context(), topic.Stream(0), "+", "-", 50).Result()
			for _, x := range xs {
				if x.Values["payload"] == payload {
					return true
				}
			}
			return false
		}, "the dead letter back on notify.history and gone from its dead letters")
		screenshots(t, ctx)
	})

	t.Run("a read key sees everything but cannot act", func(t *testing.T) {
		ref := addDeadLetter(t, rdb, `[{"id":"n_console_read"}]`)
		// The same tab, its key forgotten: a background tab's timers are
		// throttled.
		eval[bool](t, ctx, `sessionStorage.clear() === undefined`)
		tab := ctx
		login(t, tab, base, "console-read-key")
		run(t, tab, 30*time.Second, "the dead letter without actions",
			chromedp.Click(chromedp.CSS(`#tabs button[data-tab="dead"]`)),
			chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector("#dltopic"); s.value = "notify.history"; s.dispatchEvent(new Event("change")); })()`),
			chromedp.WaitVisible(chromedp.CSS(`#dltable tr[data-ref="`+ref+`"]`)))
		buttons := eval[int](t, tab, `document.querySelectorAll("button.replay, button.purge, button.act").length`)
		if buttons != 0 {
			t.Errorf("a read key sees %d action buttons, want none", buttons)
		}
		body := fmt.Sprintf(`{"topic":"notify.history","refs":[%q]}`, ref)
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/console/deadletters/replay", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer console-read-key")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("replay with a read key = %d, want 403", resp.StatusCode)
		}
	})

	if errs := pageErrors(); len(errs) > 0 {
		t.Errorf("the page reported errors:\n%s", strings.Join(errs, "\n"))
	}
}

// screenshots writes docs/console.png (the flows),
// docs/console-events.png and docs/console-charts.png when
// DROPSTREAM_TEST_SCREENSHOTS is set.
func screenshots(t *testing.T, ctx context.Context) {
	t.Helper()
	if os.Getenv(envScreenshots) == "" {
		return
	}
	shot := func(tab, ready string) []byte {
		run(t, ctx, 30*time.Second, "show "+tab,
			chromedp.Click(chromedp.CSS(`#tabs button[data-tab="`+tab+`"]`)),
			chromedp.WaitVisible(chromedp.CSS(ready)))
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		b, err := chromedp.Run(sctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatalf("screenshot of %s: %v", tab, err)
		}
		return b
	}
	flows := shot("flows", "#stages tbody tr")
	events := shot("events", "#eventlist li")
	charts := shot("charts", "#chartgrid svg.spark polyline")
	for name, b := range map[string][]byte{"console.png": flows, "console-events.png": events, "console-charts.png": charts} {
		if err := os.WriteFile(filepath.Join("..", "..", "docs", name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
