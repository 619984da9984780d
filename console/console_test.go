package console

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/api/apitest"
	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/internal/tenancy"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

var testTopic = stream.NewTopic("t", "in", 2)

// newTestConsole serves a console over one flow with one stage reading
// testTopic, and an event list: one event of shared data, and one of each
// of the tenants ta and tb, which the flow shows to the views that see
// them.
func newTestConsole(t *testing.T, rdb redis.UniversalClient) *api.Server {
	t.Helper()
	desc := flow.Description{
		Stages: []stream.Stage{{Name: "t-a", Topic: testTopic}},
		Events: func(_ context.Context, v tenancy.View, limit int) ([]flow.Event, error) {
			out := []flow.Event{{Kind: "thing", ID: "e1", Subject: "s", Summary: "happened",
				Cause: []flow.Ref{{Kind: "run", ID: "r1"}}}}
			for _, tenant := range []string{"ta", "tb"} {
				if v.Sees(tenant) {
					out = append(out, flow.Event{Kind: "thing", ID: "of-" + tenant})
				}
			}
			return out[:min(limit, len(out))], nil
		},
	}
	c, err := New(Config{Redis: rdb, Flows: []Flow{{Name: "t", Desc: desc}}})
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := apitest.NewServer(t, api.Config{APIKeys: "r:read;a:admin;ra:read:tenant=ta;rb:write:tenant=tb"})
	c.Register(srv)
	return srv
}

func get(t *testing.T, srv *api.Server, path, key string) apitest.Response {
	t.Helper()
	return apitest.Request(t, srv, http.MethodGet, path, nil, api.HeaderAPIKey, key)
}

func TestConfig_Validate_reportsEveryMissingField(t *testing.T) {
	err := Config{}.Validate()
	if err == nil || len(err.(interface{ Unwrap() []error }).Unwrap()) != 2 {
		t.Fatalf("Validate() = %v, want Redis and Flows missing", err)
	}
}

// grouped returns a client of backend b on which testTopic has the group
// of stage t-a.
func grouped(t *testing.T, b testenv.Backend) redis.UniversalClient {
	t.Helper()
	rdb := b.Client(t)
	if err := stream.EnsureGroups(t.Context(), rdb, testTopic, "t-a"); err != nil {
		t.Fatal(err)
	}
	return rdb
}

func TestStages_figuresComeFromRedis(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			ctx, rdb := t.Context(), grouped(t, b)
			for i := range 5 {
				rdb.XAdd(ctx, &redis.XAddArgs{Stream: testTopic.Stream(0), Values: []any{"type", "x", "payload", i}})
			}
			xs, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "t-a", Consumer: "copy-1",
				Streams: []string{testTopic.Stream(0), ">"}, Count: 3}).Result()
			if err != nil {
				t.Fatal(err)
			}
			rdb.XAck(ctx, testTopic.Stream(0), "t-a", xs[0].Messages[0].ID)
			// A copy in another process reads the other partition.
			rdb.XAdd(ctx, &redis.XAddArgs{Stream: testTopic.Stream(1), Values: []any{"type", "x", "payload", "p"}})
			if err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "t-a", Consumer: "copy-2",
				Streams: []string{testTopic.Stream(1), ">"}, Count: 1}).Err(); err != nil {
				t.Fatal(err)
			}
			rdb.XAdd(ctx, &redis.XAddArgs{Stream: testTopic.DeadLetterStream(1), Values: []any{"type", "x", "payload", "bad", "dlq.reason", "r"}})
			// Paused from anywhere: every console shows it, to read keys too.
			if err := stream.NewControl(rdb).Pause(ctx, "t-a"); err != nil {
				t.Fatal(err)
			}

			// Two processes' consoles over one Redis show one truth.
			var seen []StageStats
			for range 2 {
				var v stagesView
				get(t, newTestConsole(t, rdb), "/v1/console/stages", "r").JSON(t, &v)
				if len(v.Items) != 1 {
					t.Fatalf("stages %+v, want t-a", v.Items)
				}
				st := v.Items[0]
				if !st.Known || st.Pending != 3 || st.Lag != 2 || st.DeadLetters != 1 || st.Copies != 2 || st.P99Ms != -1 || !st.Paused {
					t.Errorf("t-a = %+v, want pending 3, lag 2, 1 dead letter, 2 copies, no p99, paused", st)
				}
				seen = append(seen, st)
			}
			seen[0].OldestPendingS, seen[1].OldestPendingS = 0, 0
			if seen[0] != seen[1] {
				t.Errorf("two consoles disagree: %+v and %+v", seen[0], seen[1])
			}
		})
	}
}

func TestSampler_throughputFromDeliveriesBetweenSamples(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			ctx, rdb := t.Context(), grouped(t, b)
			s := newSampler(rdb, nil, []stageRef{{Flow: "t", Name: "t-a", Group: "t-a", Topic: testTopic}})
			read := func(n int) {
				for range n {
					rdb.XAdd(ctx, &redis.XAddArgs{Stream: testTopic.Stream(1), Values: []any{"type", "x", "payload", "p"}})
				}
				if _, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "t-a", Consumer: "c",
					Streams: []string{testTopic.Stream(1), ">"}, Count: int64(n)}).Result(); err != nil {
					t.Fatal(err)
				}
			}
			read(2)
			first, err := s.stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			read(10)
			s.at = s.at.Add(-2 * time.Second) // the next sample is two seconds later
			second, err := s.stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if d := second[0].Delivered - first[0].Delivered; d != 10 {
				t.Errorf("delivered %d → %d, want 10 more", first[0].Delivered, second[0].Delivered)
			}
			if tp := second[0].Throughput; tp < 4 || tp > 5.1 {
				t.Errorf("throughput %v, want about 10 in 2 s", tp)
			}
		})
	}
}

func TestQuantile_interpolatesWithinBuckets(t *testing.T) {
	bounds := []float64{0.001, 0.01, 0.1, math.Inf(1)}
	tests := []struct {
		name string
		cum  []float64
		q    float64
		want float64
	}{
		{"all in the first bucket", []float64{100, 100, 100, 100}, 0.99, 0.99},
		{"the tail in the second", []float64{90, 100, 100, 100}, 0.99, 9.1},
		{"the open bucket answers its lower bound", []float64{0, 0, 0, 10}, 0.99, 100},
		{"no calls", []float64{0, 0, 0, 0}, 0.99, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := quantile(tt.q, bounds, tt.cum); math.Abs(got-tt.want) > 0.01 {
				t.Errorf("quantile = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDeadLetters_pagedByCursorOverEveryPartition(t *testing.T) {
	ctx := t.Context()
	rdb := testenv.Dial(t, testenv.RedisURL(t))
	var want []string
	for p := testTopic.Partitions - 1; p >= 0; p-- { // added out of order: the walk orders them
		for i := range 3 {
			id := rdb.XAdd(ctx, &redis.XAddArgs{Stream: testTopic.DeadLetterStream(p), Values: []any{"key", "k", "type", "x",
				"payload", fmt.Sprintf("p%d-%d", p, i), "dlq.reason", "boom"}}).Val()
			want = append(want, fmt.Sprintf("%d/%s", p, id))
		}
	}
	slices.SortStableFunc(want, func(a, b string) int {
		return strings.Compare(a[:strings.IndexByte(a, '/')], b[:strings.IndexByte(b, '/')])
	})
	srv := newTestConsole(t, rdb)

	var got []string
	cursor, pages := "", 0
	for {
		var page deadLetterPage
		get(t, srv, "/v1/console/deadletters?topic=t.in&limit=2&cursor="+url.QueryEscape(cursor), "r").JSON(t, &page)
		pages++
		if page.Count != int64(len(want)) || len(page.Items) > 2 || page.NextCursor != "" && len(page.Items) != 2 {
			t.Fatalf("page %d: %+v, want at most 2 of %d, full while another follows", pages, page, len(want))
		}
		for _, it := range page.Items {
			got = append(got, it.Ref)
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	if !slices.Equal(got, want) {
		t.Errorf("walk gave %v, want every dead letter once in order %v", got, want)
	}
	if wantPages := (len(want) + 1) / 2; pages != wantPages {
		t.Errorf("%d pages, want %d", pages, wantPages)
	}
	apitest.WantEnvelope(t, get(t, srv, "/v1/console/deadletters?topic=t.in&cursor=nonsense", "r"), http.StatusBadRequest, "invalid_cursor")
}

func TestDeadLetters_listedByTopicAndReplayedByAnAdmin(t *testing.T) {
	ctx := t.Context()
	rdb := testenv.Dial(t, testenv.RedisURL(t))
	id := rdb.XAdd(ctx, &redis.XAddArgs{Stream: testTopic.DeadLetterStream(1), Values: []any{"key", "k", "type", "x", "payload", `{"a":1}`,
		"dlq.reason", "boom", "dlq.stage", "t-a", "dlq.attempts", "3", "dlq.origin_id", "1-1"}}).Val()
	srv := newTestConsole(t, rdb)

	var page deadLetterPage
	get(t, srv, "/v1/console/deadletters?topic=t.in", "r").JSON(t, &page)
	if page.Count != 1 || len(page.Items) != 1 || page.Items[0].Ref != "1/"+id || page.Items[0].Reason != "boom" ||
		page.Items[0].Attempts != 3 || page.Items[0].Payload != `{"a":1}` || page.Items[0].Stage != "t-a" {
		t.Fatalf("dead letters %+v, want the one added", page)
	}
	apitest.WantEnvelope(t, get(t, srv, "/v1/console/deadletters?topic=nope.x", "r"), http.StatusBadRequest, "unknown_topic")
	apitest.WantEnvelope(t, get(t, srv, "/v1/console/deadletters?topic=t.in&limit=0", "r"), http.StatusBadRequest, "invalid_limit")

	body := deadLetterAction{Topic: "t.in", Refs: []string{"1/" + id}}
	r := apitest.Request(t, srv, http.MethodPost, "/v1/console/deadletters/replay", body, api.HeaderAPIKey, "r")
	if r.Status != http.StatusForbidden {
		t.Fatalf("replay with a read key = %d, want 403", r.Status)
	}
	r = apitest.Request(t, srv, http.MethodPost, "/v1/console/deadletters/replay", body, api.HeaderAPIKey, "a")
	var done actionResult
	r.JSON(t, &done)
	if r.Status != http.StatusOK || done.Done != 1 {
		t.Fatalf("replay = %d %s, want 1 done", r.Status, r.Body)
	}
	if n := rdb.XLen(ctx, testTopic.DeadLetterStream(1)).Val(); n != 0 {
		t.Errorf("%d dead letters left, want 0", n)
	}
	if xs := rdb.XRange(ctx, testTopic.Stream(1), "-", "+").Val(); len(xs) != 1 || xs[0].Values["payload"] != `{"a":1}` {
		t.Errorf("stream holds %v, want the replayed message", xs)
	}
	r = apitest.Request(t, srv, http.MethodPost, "/v1/console/deadletters/purge", body, api.HeaderAPIKey, "a")
	apitest.WantEnvelope(t, r, http.StatusNotFound, "dead_letter_not_found")
}

func TestEvents_byFlowWithTheirCause(t *testing.T) {
	srv := newTestConsole(t, testenv.Dial(t, testenv.RedisURL(t)))
	var page eventPage
	get(t, srv, "/v1/console/events?flow=t&limit=5", "r").JSON(t, &page)
	if len(page.Items) != 1 || page.Items[0].Cause[0] != (flow.Ref{Kind: "run", ID: "r1"}) {
		t.Errorf("events %+v, want the flow's one with its run", page)
	}
	var g graphView
	get(t, srv, "/v1/console/graph", "r").JSON(t, &g)
	if len(g.EventFlows) != 1 || g.EventFlows[0] != "t" || len(g.Flows) != 1 || g.Flows[0].Stages[0].Name != "t-a" {
		t.Errorf("graph %+v, want flow t with stage t-a and events", g)
	}
	apitest.WantEnvelope(t, get(t, srv, "/v1/console/events?flow=nope", "r"), http.StatusBadRequest, "unknown_flow")
	apitest.WantEnvelope(t, get(t, srv, "/v1/console/events?flow=t", ""), http.StatusUnauthorized, "unauthenticated")
	apitest.WantEnvelope(t, get(t, srv, "/v1/console/traces/0123", "r"), http.StatusNotFound, "trace_not_found")
}

// TestEvents_eachTenantSeesItsOwn lists a flow's events with keys of
// several tenants: each sees its own tenant's events and those of shared
// data, an admin key every tenant's.
func TestEvents_eachTenantSeesItsOwn(t *testing.T) {
	srv := newTestConsole(t, testenv.Dial(t, testenv.RedisURL(t)))
	for _, tc := range []struct {
		key  string
		want []string
	}{
		{"ra", []string{"e1", "of-ta"}},
		{"rb", []string{"e1", "of-tb"}},
		{"r", []string{"e1"}}, // a key without tenant= is a tenant of its own
		{"a", []string{"e1", "of-ta", "of-tb"}},
	} {
		t.Run(tc.key, func(t *testing.T) {
			var page eventPage
			get(t, srv, "/v1/console/events?flow=t&limit=50", tc.key).JSON(t, &page)
			var got []string
			for _, ev := range page.Items {
				got = append(got, ev.ID)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("events of key %s = %v, want %v", tc.key, got, tc.want)
			}
		})
	}
}

func TestPage_isOpenAndSmall(t *testing.T) {
	srv := newTestConsole(t, testenv.Dial(t, testenv.RedisURL(t)))
	total := 0
	for _, p := range []string{Path, Path + "/app.js", Path + "/app.css"} {
		r := apitest.Get(t, srv, p)
		if r.Status != http.StatusOK {
			t.Fatalf("GET %s = %d", p, r.Status)
		}
		total += len(r.Body)
	}
	if total > 300<<10 {
		t.Errorf("the page weighs %d bytes, want at most 300 KB", total)
	}
}
