package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dropstream/dropstream/flows/comic"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/history"
	"github.com/dropstream/dropstream/stream"
)

// The workload of the crash test: every comic matches every subscription,
// each with its own webhook, so each comic listed makes one notification
// per subscription.
const (
	crashSubscriptions = 100
	crashComics        = 40
	crashExpected      = crashSubscriptions * crashComics
	// crashPace spaces the comics listed: a steady stream over about 24s.
	crashPace = 600 * time.Millisecond
)

// TestNotifier_KilledMidBatchResendsOnlyWhatWasInFlight lists 40 comics,
// one every 600 ms, to 100 subscriptions with webhooks in the test (4,000
// notifications), the notifier stages in their own process with a stable
// instance id, Redis with an append-only file fsynced at every write. The
// receiver kills the notifier with SIGKILL mid-batch at its 1,333rd
// request and, once the restarted process has logged its resends, at its
// 2,666th (or the first request after); the test restarts it at once.
//
// In flight at a kill are the sends the killed process had begun and not
// recorded: the ledger records that still held its send lease once it was
// gone. Only those may be sent twice. It checks that every notification arrived, each
// duplicate is one of those and carries the webhook-id of its first
// delivery, history (GET /v1/notifications, paged) equals the ledger and
// what arrived, a crash counted no attempt, and each restart logged its
// resends in one line.
func TestNotifier_KilledMidBatchResendsOnlyWhatWasInFlight(t *testing.T) {
	ctx := context.Background()
	bin := buildBinary(t)
	start := time.Now()
	srv := testenv.StartRedis(t, testenv.RedisConfig{AppendOnly: true, AppendFsync: "always"})
	rdb := dial(t, srv.URL())
	rcv := &crashReceiver{t: t, secrets: map[string]string{}, killAt: []int{crashExpected / 3, 2 * crashExpected / 3},
		killed: make(chan struct{}, 2)}
	hooks := httptest.NewServer(rcv)
	t.Cleanup(hooks.Close)

	apiAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	base := "http://" + apiAddr
	web := &http.Client{Timeout: time.Minute}
	// One wave tells every subscription: the workload is the notifier's.
	flows := startProcEnv(t, bin, "flows", []string{fmt.Sprintf("%s=%d", comic.VarHoldWave, crashSubscriptions)}, "run", "--redis-url", srv.URL(), "--api-addr", apiAddr, "--instance", "flows",
		"--stages", comic.StageMatcher+","+comic.StageDelivery, "--api-limits", "off", "--log-level", "info")
	flows.waitStarted(t, comic.StageMatcher, comic.StageDelivery)
	notifierArgs := []string{"run", "--redis-url", srv.URL(), "--api-addr", "", "--instance", "notifier",
		"--stages", notifier.StageDeliver + "," + notifier.RetryService, "--log-level", "info"}
	startNotifier := func() *proc {
		p := startProc(t, bin, "notifier", notifierArgs...)
		p.waitStarted(t, notifier.StageDeliver)
		return p
	}
	procs := []*proc{startNotifier()}
	rcv.restarted(procs[0], true)

	send := func(method, path string, in, out any) error {
		var body io.Reader
		if in != nil {
			b, _ := json.Marshal(in)
			body = strings.NewReader(string(b))
		}
		req, _ := http.NewRequest(method, base+path, body)
		req.Header.Set("Content-Type", "application/json")
		resp, err := web.Do(req)
		if err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode/100 != 2 || (out != nil && json.Unmarshal(b, out) != nil) {
			return fmt.Errorf("%s %s = %d %s", method, path, resp.StatusCode, b)
		}
		return nil
	}
	call := func(method, path string, in, out any) {
		t.Helper()
		if err := send(method, path, in, out); err != nil {
			t.Fatal(err)
		}
	}
	testenv.WaitFor(t, 30*time.Second, func() bool { return send("GET", "/healthz", nil, nil) == nil }, "the API answers")
	for i := range crashSubscriptions {
		path := fmt.Sprintf("%03d", i)
		var sub comic.Subscription
		call("POST", "/v1/subscriptions", map[string]any{"email": fmt.Sprintf("reader%s@example.com", path), "body": map[string]any{"publisher": "DC"},
			"notify_url": hooks.URL + "/notify/" + path}, &sub)
		rcv.secrets[path] = sub.Secret
	}

	// The steady stream, in the background.
	want := map[[2]string]bool{}
	var wantMu sync.Mutex
	listed := make(chan struct{})
	go func() {
		defer close(listed)
		tick := time.NewTicker(crashPace)
		defer tick.Stop()
		for n := range crashComics {
			cm := comic.Comic{Grade: 9.4, Issue: fmt.Sprint(n + 1), PriceCents: 500 + int64(n), Printing: 1, Publisher: "DC",
				Series: "Crash", Title: fmt.Sprintf("Crash #%d", n+1), Year: 1990}
			var got struct {
				ID string `json:"id"`
			}
			if err := send("POST", "/v1/comics", cm, &got); err != nil {
				t.Error(err)
				return
			}
			wantMu.Lock()
			for i := range crashSubscriptions {
				want[[2]string{got.ID, fmt.Sprintf("reader%03d@example.com", i)}] = true
			}
			wantMu.Unlock()
			<-tick.C
		}
	}()

	// Two kills, each followed by a restart at once. inFlight[k] are the
	// sends the killed process had begun and not recorded: their ledger
	// records still held its lease (state sending) once it was gone. A
	// request it wrote before dying may reach the receiver after that, so
	// reached[k] counts those the receiver had begun by the restart.
	var inFlight []map[string]bool
	var reached []int
	var restartedAt []time.Time
	for k := range 2 {
		select {
		case <-rcv.killed:
		case <-time.After(2 * time.Minute):
			begun, _, _ := rcv.state()
			t.Fatalf("kill %d did not happen: %d requests received", k+1, begun)
		}
		// The dead process's requests are all answered (to nobody) or
		// dropped: nothing else sends until the restart.
		testenv.WaitFor(t, 30*time.Second, func() bool { _, active, _ := rcv.state(); return active == 0 }, "the killed process's requests done")
		_, _, got := rcv.state()
		held := map[string]bool{}
		for id, s := range ledgerStates(ctx, t, rdb) {
			if s == notifier.DeliverySending {
				held[id] = true
			}
		}
		seen := map[string]bool{}
		for _, g := range got {
			if held[g.id] {
				seen[g.id] = true
			}
		}
		inFlight, reached = append(inFlight, held), append(reached, len(seen))
		restartedAt = append(restartedAt, time.Now())
		p := startNotifier()
		procs = append(procs, p)
		rcv.restarted(p, false)
		// The next kill waits for this process's resends to be logged: a
		// kill within the episode would lose its line.
		testenv.WaitFor(t, time.Minute, func() bool { return len(p.logs.warnings(notifier.MsgResumed)) > 0 }, "restart %d logs its resends", k+1)
		rcv.restarted(p, k == 0)
	}
	<-listed

	wantMu.Lock()
	expected := len(want)
	wantMu.Unlock()
	if expected != crashExpected {
		t.Fatalf("%d notifications expected, want %d", expected, crashExpected)
	}
	received := func() map[[2]string]bool {
		_, _, got := rcv.state()
		out := map[[2]string]bool{}
		for _, g := range got {
			out[g.pair] = true
		}
		return out
	}
	testenv.WaitFor(t, 2*time.Minute, func() bool { return len(received()) >= expected }, "every notification received")
	// Nothing left to send: the notifier's group has acknowledged
	// everything it read.
	requests := notifier.RequestTopic(8)
	testenv.WaitFor(t, time.Minute, func() bool { return busy(ctx, rdb, []group{{requests, notifier.StageDeliver}}) == "" },
		"the notifier's group idle")

	_, _, got := rcv.state()
	ids := map[[2]string]string{} // pair → webhook-id of its first delivery
	count := map[string]int{}     // webhook-id → deliveries
	subs := map[string]bool{}
	first := map[string]time.Time{}
	for _, g := range got {
		if prev, ok := ids[g.pair]; ok && prev != g.id {
			t.Errorf("%v delivered with webhook-id %s, then %s: want the same id every time", g.pair, prev, g.id)
		} else if !ok {
			ids[g.pair], first[g.id] = g.id, g.at
		}
		count[g.id]++
		subs[g.sub] = true
	}
	missing := 0
	for pair := range want {
		if _, ok := ids[pair]; !ok {
			missing++
		}
	}
	if missing != 0 || len(ids) != expected {
		t.Errorf("%d notifications missing, %d distinct received; want all %d, each once at least", missing, len(ids), expected)
	}
	rcv.mu.Lock()
	for _, b := range rcv.bad {
		t.Error(b)
	}
	kills := slices.Clone(rcv.kills)
	rcv.mu.Unlock()

	// Duplicates: only sends in flight at a kill, resent after its restart.
	duplicates, bound := 0, 0
	for id, n := range count {
		if n == 1 {
			continue
		}
		duplicates += n - 1
		kills := 0
		for _, held := range inFlight {
			if held[id] {
				kills++
			}
		}
		if n-1 > kills {
			t.Errorf("notification %s delivered %d times, in flight at %d kills: only a send in flight at a kill may be sent again", id, n, kills)
		}
	}
	resent := make([]int, len(inFlight)) // per kill: its sends in flight received after its restart
	for k, un := range inFlight {
		bound += len(un)
		again := map[string]bool{}
		for _, g := range got {
			if un[g.id] && g.at.After(restartedAt[k]) {
				again[g.id] = true
			}
		}
		resent[k] = len(again)
	}
	if duplicates > bound {
		t.Errorf("%d duplicates, more than the %d sends in flight at the kills", duplicates, bound)
	}

	// History: every subscriber's notifications, paged, equal the ledger
	// and what arrived; a crash counted no attempt.
	states := ledgerStates(ctx, t, rdb)
	sentLedger := map[string]bool{}
	for id, s := range states {
		if s == notifier.DeliverySent {
			sentLedger[id] = true
		}
	}
	sentHistory := map[string]bool{}
	failed := map[string]int{}
	var sentRecs []history.Record
	for sub := range subs {
		cursor := ""
		for {
			var page struct {
				Items      []history.Record `json:"items"`
				NextCursor string           `json:"next_cursor"`
			}
			call("GET", "/v1/notifications?limit=25&subscriber="+url.QueryEscape(sub)+"&cursor="+url.QueryEscape(cursor), nil, &page)
			for _, rec := range page.Items {
				switch rec.Status {
				case history.StatusSent:
					sentHistory[rec.ID] = true
					sentRecs = append(sentRecs, rec)
				case history.StatusFailed:
					failed[rec.ID]++
				}
			}
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
	}
	for _, rec := range sentRecs {
		if rec.Attempts != 1+failed[rec.ID] {
			t.Errorf("notification %s sent on attempt %d after %d failures: a crash must not count as an attempt", rec.ID, rec.Attempts, failed[rec.ID])
		}
	}
	distinct := map[string]bool{}
	for id := range count {
		distinct[id] = true
	}
	if !equalSets(sentHistory, sentLedger) || !equalSets(sentLedger, distinct) {
		t.Errorf("history holds %d notifications sent, the ledger %d, the receiver got %d distinct: want the same ones",
			len(sentHistory), len(sentLedger), len(distinct))
	}
	if n, err := stream.NewDeadLetters(rdb).Count(ctx, requests); err != nil || n != 0 {
		t.Errorf("%d dead letters (%v), want none", n, err)
	}

	// Each restart logged its resends once, and resent at least what was
	// in flight at its kill.
	for k, p := range procs[1:] {
		lines := p.logs.warnings(notifier.MsgResumed) // one at least: waited for after the restart
		if n, _ := lines[0]["deliveries"].(float64); len(lines) != 1 || int(n) < resent[k] {
			t.Errorf("restart %d logged %v: want one line counting at least its %d resends", k+1, lines, resent[k])
		}
	}

	// The figures.
	failures := 0
	for _, n := range failed {
		failures += n
	}
	t.Logf("expected %d, received %d, distinct %d, duplicates %d, missing %d; history: %d sent, %d failed sends; %s from the start of Redis",
		expected, len(got), len(ids), duplicates, missing, len(sentRecs), failures, time.Since(start).Round(time.Second))
	for k, kl := range kills {
		resume, back := "none", "nothing to resend"
		for _, g := range got {
			if g.at.After(restartedAt[k]) {
				resume = g.at.Sub(restartedAt[k]).Round(time.Millisecond).String()
				break
			}
		}
		var last time.Time
		for _, g := range got {
			if inFlight[k][g.id] && g.at.After(restartedAt[k]) && g.at.After(last) {
				last = g.at
			}
		}
		if !last.IsZero() {
			back = last.Sub(restartedAt[k]).Round(time.Millisecond).String()
		}
		t.Logf("kill %d at request %d: %d requests active at the receiver; %d sends in flight (begun, not recorded: the bound), "+
			"%d of them at the receiver by the restart, %d received after it; restart: first delivery after %s, the killed sends back after %s",
			k+1, kl.count, kl.active, len(inFlight[k]), reached[k], resent[k], resume, back)
	}
}
