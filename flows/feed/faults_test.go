package feed

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/dropstream/dropstream/flows/feed/feedsim"
	"github.com/dropstream/dropstream/internal/egress/egresstest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// historyKinds counts the history events of the feed by kind.
func (h *harness) historyKinds() map[string]int {
	h.t.Helper()
	out := map[string]int{}
	for p := 0; p < h.flow.topics.History.Partitions; p++ {
		entries, err := h.rdb.XRange(h.ctx, h.flow.topics.History.Stream(p), "-", "+").Result()
		if err != nil {
			h.t.Fatal(err)
		}
		for _, e := range entries {
			payload, _ := e.Values["payload"].(string)
			for _, kind := range []string{EventFirstSeen, EventEdited, EventExcluded, EventAssigned, EventDelivered, EventCleared} {
				if strings.Contains(payload, `"kind":"`+kind+`"`) {
					out[kind]++
				}
			}
		}
	}
	return out
}

// A copy of a stage dies at a point of its handler: it has applied part
// of a message (observed the poll's items; assigned them and completed and
// forwarded their collections; delivered a collection) and never returns
// nor acknowledges. Another copy claims the message once it is idle and
// handles it again: every item is assigned once and every collection is
// delivered once, to a log destination and to a confirmed e-mail address.
func TestFlow_aCopyDyingMidAssignmentOrDeliveryIsReplacedAndSendsOnce(t *testing.T) {
	for _, tc := range []struct{ point, stage string }{{"observed", StageAssign}, {"assigned", StageAssign}, {"delivered", StageDeliver}} {
		for _, b := range testenv.Backends() {
			t.Run(tc.point+"/"+b.Name, func(t *testing.T) {
				var died atomic.Int32
				hung, release := make(chan struct{}), make(chan struct{})
				dieOnce := func(h *harness) {
					h.skip[tc.stage] = true
					t.Cleanup(func() { close(release) })
					h.flow.crashPoint = func(at string, m *stream.Message) error {
						// A delivery copy dies on a collection of pairs, which
						// goes to the log and to the e-mail address.
						if at != tc.point || (at == "delivered" && !strings.Contains(string(m.Payload), `"subscribable":"pairs"`)) ||
							!died.CompareAndSwap(0, 1) {
							return nil
						}
						close(hung)
						<-release // the copy is dead: no return, no ack, whatever its context says
						return errors.New("dead copy")
					}
				}
				sim := feedsim.New(feedsim.RSS, item("1", "one"), item("2", "two"), item("3", "three"))
				h := newHarness(t, b, sim, Feed{IncludeExisting: true}, dieOnce)
				h.subscribe("each", Manager{Kind: EachItem})
				h.subscribe("pairs", Manager{Kind: EveryN, N: 2})
				willow := "willow@sunnydale.edu"
				if _, _, err := h.flow.Subscribe(h.ctx, h.feed.ID, "pairs", Destination{Kind: DestEmail, Address: willow}); err != nil {
					t.Fatal(err)
				}
				stage := h.stage(tc.stage)
				kill := h.runStage(stage, "dying", time.Minute)
				testenv.WaitFor(t, waitTimeout, func() bool { return len(h.mailsTo(willow)) == 1 }, "confirmation request")
				if _, _, err := h.subs.Confirm(h.ctx, confirmToken(t, h.mailsTo(willow)[0])); err != nil {
					t.Fatal(err)
				}

				h.clock.Set(t0)
				if _, err := h.poller.PollOnce(h.ctx, h.feed); err != nil {
					t.Fatal(err)
				}
				select {
				case <-hung:
				case <-time.After(waitTimeout):
					t.Fatalf("the copy never reached %q", tc.point)
				}
				kill()
				h.runStage(stage, "survivor", time.Second)
				h.settle()
				sim.Add(item("4", "four"))
				h.pollAt(t0.Add(time.Minute))

				want := map[string][][]string{"each": {{"1"}, {"2"}, {"3"}, {"4"}}, "pairs": {{"1", "2"}, {"3", "4"}}}
				if got := h.delivered(); !reflect.DeepEqual(got, want) {
					t.Fatalf("delivered to the log %v, want %v", got, want)
				}
				var subjects []string
				for _, m := range h.mailsTo(willow)[1:] {
					subjects = append(subjects, m.subject())
				}
				if want := []string{"2 new items: pairs", "2 new items: pairs"}; !reflect.DeepEqual(subjects, want) {
					t.Fatalf("mails %q, want %q", subjects, want)
				}
				if died.Load() != 1 {
					t.Errorf("the copy died %d times, want once", died.Load())
				}
				wantKinds := map[string]int{EventFirstSeen: 4, EventAssigned: 4, EventDelivered: 8, EventCleared: 4}
				if got := h.historyKinds(); !reflect.DeepEqual(got, wantKinds) {
					t.Errorf("history %v, want %v", got, wantKinds)
				}
				h.wantAllCleared()
			})
		}
	}
}

func TestFlow_aFailedFetchObservesNothingButTimeStillAssigns(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			sim := feedsim.New(feedsim.RSS, item("a", "A"))
			h := newHarness(t, b, sim, Feed{AwaitStabilizationMinutes: 10, MaxDelayMinutes: 60, IncludeExisting: true})
			h.subscribe("each", Manager{Kind: EachItem})
			h.pollAt(t0)
			for i, mode := range []string{"malformed", "huge", "slow", "loop"} {
				h.mode.Store(mode)
				p := h.pollAt(t0.Add(time.Duration(i+1) * time.Minute))
				if p.OK || p.Error == "" {
					t.Fatalf("%s: poll %+v, want a failed poll with its error", mode, p)
				}
				st, ok := h.flow.store.Status(h.ctx, h.feed.ID)
				if !ok || st.OK || st.Failures != i+1 {
					t.Errorf("%s: status %+v, want a failure, %d in a row", mode, st, i+1)
				}
			}
			if got := len(h.sink.messages("collection")); got != 0 {
				t.Fatalf("%d deliveries before the item was stable", got)
			}
			// Only failed polls since t0: a is still stable since t0.
			h.mode.Store("malformed")
			h.pollAt(t0.Add(10 * time.Minute))
			if got, want := h.delivered(), map[string][][]string{"each": {{"a"}}}; !reflect.DeepEqual(got, want) {
				t.Fatalf("delivered %v, want %v", got, want)
			}
			h.mode.Store("")
			h.pollAt(t0.Add(11 * time.Minute))
			if st, _ := h.flow.store.Status(h.ctx, h.feed.ID); !st.OK || st.Failures != 0 {
				t.Errorf("status after a good poll %+v", st)
			}
		})
	}
}

// A failed poll keeps the class of its failure (and the status of an
// answer), never the server's answer, a redirect's target or the
// transport's words: not even the banner of a service that is no web
// server.
func TestFlow_aFailedPollKeepsStatusAndClassNotTheBody(t *testing.T) {
	b := testenv.Backends()[0]
	h := newHarnessWith(t, b, feedsim.New(feedsim.RSS, item("a", "A")), Feed{IncludeExisting: true},
		func(c *Config) { c.Egress = egresstest.Loopback(t) })
	banner := egresstest.BannerServer(t)
	redirect := egresstest.RedirectServer(t, "http://10.0.0.1/private")
	for i, tc := range []struct {
		mode, url string
		want      string
	}{
		{"secret500", "", "http_5xx: HTTP 500"},
		{"malformed", "", "malformed"},
		{"huge", "", "too_large"},
		{"slow", "", "timeout"},
		{"banner", banner + "/feed.xml", "network"},
		{"redirect with a secret", redirect + "/feed.xml", "denied"},
	} {
		h.mode.Store(tc.mode)
		fd := h.feed
		if tc.url != "" {
			fd.URL = tc.url
		}
		h.clock.Set(t0.Add(time.Duration(i) * time.Minute))
		p, err := h.poller.PollOnce(h.ctx, fd)
		if err != nil {
			t.Fatal(err)
		}
		h.settle()
		st, _ := h.flow.store.Status(h.ctx, h.feed.ID)
		for what, text := range map[string]string{"poll error": p.Error, "status error": st.Error} {
			if text != tc.want {
				t.Errorf("%s: %s %q, want %q", tc.mode, what, text, tc.want)
			}
		}
	}
}

// counter returns the value of an int counter with the given attribute.
func (h *harness) counter(name, key, value string) int64 {
	h.t.Helper()
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		h.t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			sum, _ := m.Data.(metricdata.Sum[int64])
			for _, dp := range sum.DataPoints {
				if v, ok := dp.Attributes.Value(attribute.Key(key)); ok && v.AsString() == value {
					return dp.Value
				}
			}
		}
	}
	return 0
}

func TestFlow_missingAndDuplicateGUIDs(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			noGUID := item("", "no guid")
			noGUID.Link = "https://example.org/no-guid"
			sim := feedsim.New(feedsim.RSS, noGUID, item("d", "first d"), item("d", "second d"))
			h := newHarness(t, b, sim, Feed{IncludeExisting: true})
			h.subscribe("each", Manager{Kind: EachItem})
			h.pollAt(t0)
			if p := h.pollAt(t0.Add(time.Minute)); !p.OK || !p.NotModified {
				t.Fatalf("second poll %+v, want 304 not modified", p)
			}
			sim.Add(item("e", "e"))
			h.pollAt(t0.Add(2 * time.Minute)) // parsed again: warned again
			got := h.delivered()["each"]
			if len(got) != 3 || !strings.HasPrefix(got[0][0], "synth:") || got[1][0] != "d" || got[2][0] != "e" {
				t.Fatalf("delivered %v, want the synthesized guid once, d once, e once", got)
			}
			if got := h.sink.messages("collection")[1].Items[0].Title; got != "first d" {
				t.Errorf("of duplicate guids %q was kept, want the first", got)
			}
			if n := h.counter("dropstream.feed.guid_warnings", "reason", "missing"); n != 2 {
				t.Errorf("missing guid warnings %d, want 2 (one per parsed poll)", n)
			}
			if n := h.counter("dropstream.feed.guid_warnings", "reason", "duplicate"); n != 2 {
				t.Errorf("duplicate guid warnings %d, want 2", n)
			}
		})
	}
}
