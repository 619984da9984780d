package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/api/apitest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/stream"
)

// routesServer serves the watcher routes over a real Redis, with a read
// key "r" and a write key "w".
func routesServer(t *testing.T) *api.Server {
	t.Helper()
	rdb, err := stream.Dial(context.Background(), testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	watchers, err := notifier.NewWatcherStore(rdb, notifier.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := apitest.NewServer(t, api.Config{APIKeys: "r:read;w:write"})
	WatcherRoutes{Store: watchers}.Register(srv)
	return srv
}

// call sends a request with an API key and decodes a JSON answer into out.
func call(t *testing.T, srv *api.Server, method, path, key, body string, out any) int {
	t.Helper()
	var b any
	if body != "" {
		b = body
	}
	r := apitest.Request(t, srv, method, path, b, api.HeaderAPIKey, key)
	if out != nil && len(r.Body) > 0 {
		if err := json.Unmarshal(r.Body, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, path, r.Status, r.Body, err)
		}
	}
	return r.Status
}

type envelopeOut struct {
	Error struct{ Code, Message string } `json:"error"`
}

func TestWatcherRoutes_createListGetDelete(t *testing.T) {
	srv := routesServer(t)
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
