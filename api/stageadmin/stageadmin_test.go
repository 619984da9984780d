package stageadmin_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/api/apitest"
	"github.com/dropstream/dropstream/api/stageadmin"
	"github.com/dropstream/dropstream/stream"
)

// harness is an API server with the stage routes over an embedded Redis.
type harness struct {
	srv *api.Server
	rdb redis.UniversalClient
	ctl *stream.Control
}

var testStages = []stageadmin.Stage{
	{Name: "sample-enrich", Topic: stream.NewTopic("sample", "ticks", 2), Group: "sample-enrich"},
	{Name: "sample-sink", Topic: stream.NewTopic("sample", "readings", 2), Group: "sample-sink"},
	{Name: "avail-diff", Topic: stream.NewTopic("avail", "snapshots", 4), Group: "avail-diff"},
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	srv, _ := apitest.NewServer(t, api.Config{APIKeys: "r:read;a:admin"})
	ctl := stream.NewControl(rdb)
	stageadmin.Register(srv, ctl, testStages)
	return &harness{srv: srv, rdb: rdb, ctl: ctl}
}

func (h *harness) do(t *testing.T, method, path, key string) apitest.Response {
	t.Helper()
	return apitest.Request(t, h.srv, method, path, nil, api.HeaderAPIKey, key)
}

func TestStageRoutes_pauseListResume(t *testing.T) {
	h := newHarness(t)
	res := h.do(t, "POST", "/v1/admin/stages/sample-sink/pause", "a")
	if res.Status != http.StatusOK {
		t.Fatalf("pause: %d %s", res.Status, res.Body)
	}
	var st stageadmin.StageOut
	res.JSON(t, &st)
	if !st.Paused || st.PausedAt == "" || st.Stream != "sample.readings" || st.Group != "sample-sink" || st.Partitions != 2 {
		t.Errorf("pause answered %+v, want sample-sink paused with its time, stream, group and partitions", st)
	}
	if paused, err := h.ctl.Paused(context.Background()); err != nil || paused["sample-sink"].IsZero() {
		t.Errorf("after the route, Paused = %v, %v", paused, err)
	}

	res = h.do(t, "GET", "/v1/admin/stages?limit=2", "a")
	var page api.Page[stageadmin.StageOut]
	res.JSON(t, &page)
	if res.Status != http.StatusOK || len(page.Items) != 2 || page.NextCursor == "" ||
		page.Items[0].Stage != "avail-diff" || page.Items[0].Paused || page.Items[1].Stage != "sample-enrich" {
		t.Fatalf("first page: %d %s", res.Status, res.Body)
	}
	res = h.do(t, "GET", "/v1/admin/stages?limit=2&cursor="+page.NextCursor, "a")
	page = api.Page[stageadmin.StageOut]{}
	res.JSON(t, &page)
	if len(page.Items) != 1 || page.Items[0].Stage != "sample-sink" || !page.Items[0].Paused || page.NextCursor != "" {
		t.Fatalf("last page: %s", res.Body)
	}

	res = h.do(t, "POST", "/v1/admin/stages/sample-sink/resume", "a")
	st = stageadmin.StageOut{}
	res.JSON(t, &st)
	if res.Status != http.StatusOK || st.Paused || st.PausedAt != "" {
		t.Errorf("resume: %d %s", res.Status, res.Body)
	}
	if paused, _ := h.ctl.Paused(context.Background()); !paused["sample-sink"].IsZero() {
		t.Error("still paused after the resume route")
	}
}

func TestStageRoutes_refusals(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		name, method, path, key string
		status                  int
		code                    string
	}{
		{"unknown stage", "POST", "/v1/admin/stages/nope/pause", "a", http.StatusNotFound, "stage_not_found"},
		{"unknown stage resume", "POST", "/v1/admin/stages/nope/resume", "a", http.StatusNotFound, "stage_not_found"},
		{"read key", "POST", "/v1/admin/stages/sample-sink/pause", "r", http.StatusForbidden, "forbidden"},
		{"read key list", "GET", "/v1/admin/stages", "r", http.StatusForbidden, "forbidden"},
		{"no key", "GET", "/v1/admin/stages", "", http.StatusUnauthorized, "unauthenticated"},
		{"bad limit", "GET", "/v1/admin/stages?limit=0", "a", http.StatusBadRequest, "invalid_limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			apitest.WantEnvelope(t, h.do(t, tc.method, tc.path, tc.key), tc.status, tc.code)
		})
	}
	if all, err := h.ctl.Paused(context.Background()); err != nil || len(all) != 0 {
		t.Errorf("refused calls paused %v (%v)", all, err)
	}
}

func TestStageRoutes_inOpenAPI(t *testing.T) {
	h := newHarness(t)
	paths := h.srv.OpenAPI().Paths
	for _, p := range []string{"/v1/admin/stages", "/v1/admin/stages/{stage}/pause", "/v1/admin/stages/{stage}/resume", "/v1/admin/stages/{stage}/conservation"} {
		if paths.Value(p) == nil {
			t.Errorf("/openapi.json lacks %s", p)
		}
	}
}

func TestStageRoutes_conservation(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	topic := testStages[0].Topic
	if err := stream.EnsureGroups(ctx, h.rdb, topic, "sample-enrich"); err != nil {
		t.Fatal(err)
	}
	msgs := make([]*stream.Message, 5)
	for i := range msgs {
		msgs[i] = stream.NewMessage("k"+string(rune('a'+i)), "sample.tick", []byte("{}"))
	}
	if err := stream.NewPublisher(h.rdb, stream.Telemetry{}).Publish(ctx, topic, msgs...); err != nil {
		t.Fatal(err)
	}
	res := h.do(t, "GET", "/v1/admin/stages/sample-enrich/conservation", "a")
	var got stageadmin.ConservationOut
	res.JSON(t, &got)
	want := stageadmin.ConservationOut{Stage: "sample-enrich", Conservation: stream.Conservation{
		Topic: "sample.ticks", Group: "sample-enrich", Published: 5, Lag: 5, LagKnown: true}}
	if res.Status != http.StatusOK || got != want {
		t.Fatalf("conservation: %d %s\nwant %+v", res.Status, res.Body, want)
	}
	apitest.WantEnvelope(t, h.do(t, "GET", "/v1/admin/stages/nope/conservation", "a"), http.StatusNotFound, "stage_not_found")
	apitest.WantEnvelope(t, h.do(t, "GET", "/v1/admin/stages/sample-enrich/conservation", "r"), http.StatusForbidden, "forbidden")
}
