package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	gojson "github.com/goccy/go-json"
	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/api/apitest"
	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/collector"
	"github.com/dropstream/dropstream/flows/avail/watch"
	"github.com/dropstream/dropstream/internal/quota"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer"
)

// routesServer serves the availability, source and watcher routes over a
// real Redis, with a read key "r" and write keys "w" and "w2".
func routesServer(t *testing.T) (*api.Server, redis.UniversalClient, *writer.Projection) {
	t.Helper()
	return routesServerWith(t, 0)
}

// routesServerWith is routesServer with a cap of watchers per key.
func routesServerWith(t *testing.T, watchersPerKey int) (*api.Server, redis.UniversalClient, *writer.Projection) {
	t.Helper()
	rdb, err := stream.Dial(context.Background(), testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	proj, err := writer.NewProjection(rdb, writer.ProjectionConfig{Partitions: 2}, stream.Telemetry{})
	if err != nil {
		t.Fatal(err)
	}
	watchers, err := watch.NewStore(rdb, watch.StoreConfig{MaxPerOwner: watchersPerKey})
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := apitest.NewServer(t, api.Config{APIKeys: "r:read:tenant=t;w:write:tenant=t;w2:write"})
	AvailabilityRoutes{Projection: proj}.Register(srv)
	SourceRoutes{Store: collector.NewStore(rdb)}.Register(srv)
	WatcherRoutes{Store: watchers}.Register(srv)
	return srv, rdb, proj
}

// call sends a request with an API key and decodes a JSON answer into out.
func call(t *testing.T, srv *api.Server, method, path, key, body string, out any) int {
	t.Helper()
	var b any
	if body != "" {
		b = body
	}
	var headers []string
	if key != "" {
		headers = []string{api.HeaderAPIKey, key}
	}
	resp := apitest.Request(t, srv, method, path, b, headers...)
	if out != nil && len(resp.Body) > 0 {
		if err := json.Unmarshal(resp.Body, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, path, resp.Status, resp.Body, err)
		}
	}
	return resp.Status
}

type envelopeOut struct {
	Error struct{ Code, Message string } `json:"error"`
}

func TestSourceRoutes_createListGetDelete(t *testing.T) {
	srv, _, _ := routesServer(t)
	good := `{"id":"resy-nyc","provider":"resy","base_url":"https://api.example.test","interval":"90s",
		"scopes":[{"venue":"1505","date":"2026-12-01","party_size":2}],"auth_token":"secret-token"}`
	var created map[string]any
	if code := call(t, srv, "POST", "/v1/sources", "w", good, &created); code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, created)
	}
	if created["auth_token"] == "secret-token" || created["interval"] != "1m30s" {
		t.Errorf("created source %v: want the token redacted and the interval echoed", created)
	}
	for _, tc := range []struct {
		name, key, body string
		want            int
		code            string
	}{
		{"read key cannot write", "r", good, http.StatusForbidden, "forbidden"},
		{"unknown field", "w", `{"id":"x","nope":1}`, http.StatusBadRequest, "invalid_json"},
		{"unknown provider", "w", strings.Replace(good, `"resy"`, `"zzz"`, 1), http.StatusUnprocessableEntity, "invalid_source"},
		{"no scopes", "w", `{"id":"x","provider":"resy","base_url":"https://a.test","scopes":[]}`, http.StatusUnprocessableEntity, "invalid_source"},
		{"bad date", "w", strings.Replace(good, "2026-12-01", "12/01/2026", 1), http.StatusUnprocessableEntity, "invalid_source"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e envelopeOut
			if code := call(t, srv, "POST", "/v1/sources", tc.key, tc.body, &e); code != tc.want || e.Error.Code != tc.code {
				t.Errorf("POST = %d %+v, want %d %s", code, e, tc.want, tc.code)
			}
		})
	}
	var list struct{ Items []map[string]any }
	if code := call(t, srv, "GET", "/v1/sources", "r", "", &list); code != 200 || len(list.Items) != 1 || list.Items[0]["auth_token"] == "secret-token" {
		t.Errorf("list = %d %v, want one redacted source", code, list)
	}
	var one struct{ Source map[string]any }
	if code := call(t, srv, "GET", "/v1/sources/resy-nyc", "r", "", &one); code != 200 || one.Source["id"] != "resy-nyc" {
		t.Errorf("get = %d %v", code, one)
	}
	if code := call(t, srv, "DELETE", "/v1/sources/resy-nyc", "w", "", nil); code != http.StatusNoContent {
		t.Errorf("delete = %d", code)
	}
	var e envelopeOut
	if code := call(t, srv, "GET", "/v1/sources/resy-nyc", "r", "", &e); code != 404 || e.Error.Code != "source_not_found" {
		t.Errorf("get after delete = %d %+v", code, e)
	}
	if code := call(t, srv, "DELETE", "/v1/sources/resy-nyc", "w", "", &e); code != 404 {
		t.Errorf("second delete = %d", code)
	}
}

func TestWatcherRoutes_createListGetDelete(t *testing.T) {
	srv, _, _ := routesServer(t)
	var w map[string]any
	body := `{"name":"dinner","provider":"resy","venue":"1505","party_sizes":[2,4],"channel":"webhook","webhook_url":"https://hooks.example.test/x"}`
	if code := call(t, srv, "POST", "/v1/watchers", "w", body, &w); code != http.StatusCreated || w["id"] == "" || w["secret"] == "" {
		t.Fatalf("create = %d %v, want an id and the secret", code, w)
	}
	id := w["id"].(string)
	var e envelopeOut
	if code := call(t, srv, "POST", "/v1/watchers", "w", `{"name":"x","channel":"webhook"}`, &e); code != http.StatusUnprocessableEntity || e.Error.Code != "invalid_watcher" {
		t.Errorf("invalid watcher = %d %+v", code, e)
	}
	var got map[string]any
	if code := call(t, srv, "GET", "/v1/watchers/"+id, "r", "", &got); code != 200 || got["id"] != id || got["secret"] != nil && got["secret"] != "" {
		t.Errorf("get = %d %v, want the watcher without its secret", code, got)
	}
	var list struct{ Items []map[string]any }
	if code := call(t, srv, "GET", "/v1/watchers?limit=10", "r", "", &list); code != 200 || len(list.Items) != 1 {
		t.Errorf("list = %d %v", code, list)
	}
	if code := call(t, srv, "GET", "/v1/watchers?limit=0", "r", "", &e); code != 400 || e.Error.Code != "invalid_limit" {
		t.Errorf("limit 0 = %d %+v", code, e)
	}
	if code := call(t, srv, "DELETE", "/v1/watchers/"+id, "w", "", nil); code != http.StatusNoContent {
		t.Errorf("delete = %d", code)
	}
	if code := call(t, srv, "GET", "/v1/watchers/"+id, "r", "", &e); code != 404 {
		t.Errorf("get after delete = %d", code)
	}
}

func TestAvailabilityRoutes_listGetSessions(t *testing.T) {
	srv, _, proj := routesServer(t)
	ctx := context.Background()
	topics := avail.NewTopics(2)
	date := time.Now().UTC().Format("2006-01-02")
	scope := avail.Scope{Venue: "1505", Date: date, PartySize: 2}.Key("src")
	p := topics.Transitions.Partition(scope)
	at := time.Now().UTC().Truncate(time.Millisecond)
	apply := func(run string, offset time.Duration, kind, hhmm string) {
		key := avail.SlotKey("resy", "1505", date, hhmm, 2)
		e, _ := avail.ParseKey(key)
		tr := avail.Transition{EventID: avail.EventID(run, key, kind, false), Entity: e, ScopeKey: scope, SourceID: "src",
			Kind: kind, Raw: true, RunID: run, RunAt: at.Add(offset)}
		if _, err := proj.Apply(ctx, p, tr); err != nil {
			t.Fatal(err)
		}
	}
	for _, hhmm := range []string{"18:00", "18:30", "19:00"} {
		apply("run-1", 0, avail.KindOpen, hhmm)
	}
	apply("run-2", time.Minute, avail.KindClose, "19:00")
	var page struct {
		Items []struct {
			Key   string `json:"key"`
			State string `json:"state"`
		} `json:"items"`
		NextCursor string `json:"next_cursor"`
	}
	if code := call(t, srv, "GET", "/v1/availability?provider=resy&venue=1505&state=open&limit=1", "r", "", &page); code != 200 || len(page.Items) != 1 || page.NextCursor == "" {
		t.Fatalf("first page = %d %+v", code, page)
	}
	first := page.Items[0].Key
	if code := call(t, srv, "GET", "/v1/availability?provider=resy&venue=1505&state=open&limit=1&cursor="+url.QueryEscape(page.NextCursor), "r", "", &page); code != 200 || len(page.Items) != 1 || page.Items[0].Key == first {
		t.Errorf("second page = %d %+v", code, page)
	}
	if code := call(t, srv, "GET", "/v1/availability?state=closed", "r", "", &page); code != 200 || len(page.Items) != 1 || page.Items[0].State != "closed" {
		t.Errorf("closed = %d %+v", code, page)
	}
	apply("run-3", 2*time.Minute, avail.KindClose, "18:00") // the same page read again shows it
	if code := call(t, srv, "GET", "/v1/availability?state=closed", "r", "", &page); code != 200 || len(page.Items) != 2 {
		t.Errorf("closed after another close = %d %+v, want 2 items", code, page)
	}
	var e envelopeOut
	for path, wantCode := range map[string]string{
		"/v1/availability?state=maybe":      "invalid_filter",
		"/v1/availability?party_size=abc":   "invalid_party_size",
		"/v1/availability?limit=5000":       "invalid_limit",
		"/v1/availability?cursor=%21%21%21": "invalid_cursor",
	} {
		if code := call(t, srv, "GET", path, "r", "", &e); code != 400 || e.Error.Code != wantCode {
			t.Errorf("GET %s = %d %+v, want 400 %s", path, code, e, wantCode)
		}
	}
	closed := url.PathEscape(avail.SlotKey("resy", "1505", date, "19:00", 2))
	var detail struct {
		Entity      struct{ State string }  `json:"entity"`
		Transitions []struct{ Kind string } `json:"recent_transitions"`
	}
	if code := call(t, srv, "GET", "/v1/availability/"+closed, "r", "", &detail); code != 200 || detail.Entity.State != "closed" ||
		len(detail.Transitions) != 2 || detail.Transitions[0].Kind != "close" {
		t.Errorf("detail = %d %+v, want closed with close then open", code, detail)
	}
	var sessions struct {
		Items []struct {
			State    string        `json:"state"`
			Duration time.Duration `json:"duration"`
		} `json:"items"`
	}
	if code := call(t, srv, "GET", "/v1/availability/"+closed+"/sessions", "r", "", &sessions); code != 200 || len(sessions.Items) != 1 ||
		sessions.Items[0].State != "closed" || sessions.Items[0].Duration != time.Minute {
		t.Errorf("sessions = %d %+v, want one closed session of 1m", code, sessions)
	}
	if code := call(t, srv, "GET", "/v1/availability/"+url.PathEscape("resy|nope|2026-01-01|10:00|2"), "r", "", &e); code != 404 || e.Error.Code != "entity_not_found" {
		t.Errorf("missing entity = %d %+v", code, e)
	}
	if code := call(t, srv, "GET", "/v1/availability", "", "", &e); code != 401 {
		t.Errorf("no key = %d", code)
	}
}

func TestWatcherRoutes_capPerKey(t *testing.T) {
	srv, _, _ := routesServerWith(t, 3)
	body := `{"name":"dinner","provider":"resy","channel":"log"}`
	var ids []string
	for i := range 3 {
		var w map[string]any
		if code := call(t, srv, "POST", "/v1/watchers", "w", body, &w); code != http.StatusCreated {
			t.Fatalf("create %d = %d %v", i, code, w)
		}
		ids = append(ids, w["id"].(string))
	}
	var e envelopeOut
	if code := call(t, srv, "POST", "/v1/watchers", "w", body, &e); code != http.StatusConflict || e.Error.Code != "quota_exceeded" {
		t.Fatalf("fourth create = %d %+v, want 409 quota_exceeded", code, e)
	}
	if code := call(t, srv, "POST", "/v1/watchers", "w2", body, nil); code != http.StatusCreated {
		t.Fatalf("another key's create = %d, want 201", code)
	}
	var list struct{ Items []map[string]any }
	// r shares w's tenant; w2 is a tenant of its own.
	if code := call(t, srv, "GET", "/v1/watchers?limit=100", "r", "", &list); code != 200 || len(list.Items) != 3 {
		t.Fatalf("list = %d, %d watchers; want the 3 of the reader's tenant", code, len(list.Items))
	}
	if code := call(t, srv, "DELETE", "/v1/watchers/"+ids[0], "w", "", nil); code != http.StatusNoContent {
		t.Fatalf("delete = %d", code)
	}
	if code := call(t, srv, "POST", "/v1/watchers", "w", body, nil); code != http.StatusCreated {
		t.Fatalf("create after a delete = %d, want 201", code)
	}
}

func TestSourceRoutes_capPerKey(t *testing.T) {
	rdb, err := stream.Dial(context.Background(), testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	q, err := quota.New(rdb, "sources", 2)
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := apitest.NewServer(t, api.Config{APIKeys: "w:write;w2:write"})
	SourceRoutes{Store: collector.NewStore(rdb), Quota: q}.Register(srv)
	source := func(i int) string {
		return fmt.Sprintf(`{"id":"src-%d","provider":"resy","base_url":"https://api.example.test","scopes":[{"venue":"1505","date":"2026-12-01","party_size":2}]}`, i)
	}
	apitest.CheckCap(t, srv, apitest.Cap{Max: 2, Key: "w", OtherKey: "w2",
		Create: func(i int) (string, string, any) { return "POST", "/v1/sources", source(i) },
		ID:     func(t testing.TB, r apitest.Response) string { var s collector.Source; r.JSON(t, &s); return s.ID },
		Delete: func(id string) string { return "/v1/sources/" + id },
	})
	// Replacing a source the caller holds takes no second slot.
	if code := call(t, srv, "POST", "/v1/sources", "w", source(1), nil); code != http.StatusCreated {
		t.Errorf("replace of a held source at the cap = %d, want 201", code)
	}
}

func TestWatcherRoutes_patchPauseResume(t *testing.T) {
	srv, _, _ := routesServer(t)
	var w watch.Watcher
	body := `{"name":"dinner","provider":"resy","venue":"1505","channel":"log"}`
	if code := call(t, srv, "POST", "/v1/watchers", "w", body, &w); code != http.StatusCreated {
		t.Fatalf("create = %d", code)
	}
	path := "/v1/watchers/" + w.ID
	var got watch.Watcher
	patch := `{"name":"late dinner","time_zone":"America/New_York","windows":[{"days":["fri","sat"],"from":"20:00","to":"23:00"}],
		"notify_gone":true,"rearm_after_minutes":45,"provisional":true,"mute_source_health":true}`
	if code := call(t, srv, "PATCH", path, "w", patch, &got); code != 200 || got.Name != "late dinner" || got.Venue != "1505" ||
		len(got.Windows) != 1 || got.TimeZone != "America/New_York" || !got.NotifyGone || got.RearmAfterMinutes != 45 ||
		!got.Provisional || !got.MuteSourceHealth || got.Secret != "" {
		t.Fatalf("PATCH = %d %+v, want the fields given changed and the others kept", code, got)
	}
	for _, tc := range []struct {
		name, method, path, key, body string
		want                          int
		code                          string
	}{
		{"read key cannot patch", "PATCH", path, "r", `{"name":"x"}`, http.StatusForbidden, "forbidden"},
		{"unknown field", "PATCH", path, "w", `{"nope":1}`, http.StatusBadRequest, "invalid_json"},
		{"bad zone", "PATCH", path, "w", `{"time_zone":"Mars/Olympus"}`, http.StatusUnprocessableEntity, "invalid_watcher"},
		{"bad window", "PATCH", path, "w", `{"windows":[{"from":"23:00","to":"20:00"}]}`, http.StatusUnprocessableEntity, "invalid_watcher"},
		{"webhook without url", "PATCH", path, "w", `{"channel":"webhook"}`, http.StatusUnprocessableEntity, "invalid_watcher"},
		{"rearm out of range", "PATCH", path, "w", `{"rearm_after_minutes":100000}`, http.StatusUnprocessableEntity, "invalid_watcher"},
		{"no such watcher", "PATCH", "/v1/watchers/w_00000000000000000000000000ff", "w", `{"name":"x"}`, http.StatusNotFound, "watcher_not_found"},
		{"malformed id", "POST", "/v1/watchers/nope/pause", "w", "", http.StatusNotFound, "watcher_not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e envelopeOut
			if code := call(t, srv, tc.method, tc.path, tc.key, tc.body, &e); code != tc.want || e.Error.Code != tc.code {
				t.Errorf("%s %s = %d %+v, want %d %s", tc.method, tc.path, code, e, tc.want, tc.code)
			}
		})
	}
	if code := call(t, srv, "POST", path+"/pause", "w", "", &got); code != 200 || !got.Paused {
		t.Errorf("pause = %d %+v", code, got)
	}
	if code := call(t, srv, "GET", path, "r", "", &got); code != 200 || !got.Paused || got.Name != "late dinner" {
		t.Errorf("get after pause = %d %+v", code, got)
	}
	var resumed watch.Watcher
	if code := call(t, srv, "POST", path+"/resume", "w", "", &resumed); code != 200 || resumed.Paused || resumed.ID != w.ID {
		t.Errorf("resume = %d %+v", code, resumed)
	}
}

// TestAvailabilityRoutes_listAnswersEncodingJSONBytes: the list's answer,
// written with goccy/go-json, is what encoding/json writes.
func TestAvailabilityRoutes_listAnswersEncodingJSONBytes(t *testing.T) {
	at := time.UnixMilli(1764390000123).UTC()
	all := writer.EntityState{Key: "resy|1|2026-01-01|19:00|2", Partition: 3, State: "open", StableState: "closed", StableAt: at,
		Kind: "slot", Provider: "resy", Venue: "1", VenueName: "Café <\"&\u2028>", Date: "2026-01-01", Time: "19:00", PartySize: 2,
		ScopeKey: "s", SourceID: "src", FirstSeenAt: at, OpenedAt: at, ClosedAt: at, LastSeenAt: at, LastRun: "r",
		LastRunAt: at, LastEvent: "e", SessionID: "sess", TraceID: "t"}
	for _, page := range []api.Page[writer.EntityState]{{Items: []writer.EntityState{}}, {Items: []writer.EntityState{all, {Key: "k"}}, NextCursor: "c"}} {
		want, _ := json.Marshal(page)
		got, err := gojson.Marshal(page)
		if err != nil || string(got) != string(want) {
			t.Errorf("gojson.Marshal = %s, %v\nwant %s", got, err, want)
		}
	}
}
