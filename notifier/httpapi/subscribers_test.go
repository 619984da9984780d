package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/api/apitest"
	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/internal/quota"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/history"
	"github.com/dropstream/dropstream/notifier/subscriber"
	"github.com/dropstream/dropstream/stream"
)

// outbox keeps the notification requests the routes publish.
type outbox struct {
	mu   sync.Mutex
	reqs []notifier.Request
}

func (o *outbox) notify(_ context.Context, reqs ...notifier.Request) error {
	for _, r := range reqs {
		if err := r.Validate(); err != nil {
			return err
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reqs = append(o.reqs, reqs...)
	return nil
}

func (o *outbox) take() []notifier.Request {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := o.reqs
	o.reqs = nil
	return out
}

func sendJSON(t *testing.T, s *api.Server, method, path string, body any) apitest.Response {
	t.Helper()
	return apitest.Request(t, s, method, path, body)
}

func post(t *testing.T, s *api.Server, path string) apitest.Response {
	t.Helper()
	return apitest.Request(t, s, http.MethodPost, path, "List-Unsubscribe=One-Click", "Content-Type", "application/x-www-form-urlencoded")
}

// linkPath returns the path of the first link in a request's text.
func linkPath(t *testing.T, r notifier.Request) string {
	t.Helper()
	i := strings.Index(r.Text, "http://ds.test")
	if i < 0 {
		t.Fatalf("no link in %q", r.Text)
	}
	return strings.Fields(r.Text[i+len("http://ds.test"):])[0]
}

// newSubscriberEnv returns a subscriber store on miniredis, an outbox of
// the requests sent to the notifier, and a server to register routes on.
func newSubscriberEnv(t *testing.T) (*subscriber.Store, *outbox, *api.Server) {
	t.Helper()
	rdb, err := stream.Dial(context.Background(), "redis://"+miniredis.RunT(t).Addr())
	if err != nil {
		t.Fatal(err)
	}
	store, err := subscriber.NewStore(rdb, subscriber.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := apitest.NewServer(t, api.Config{})
	return store, &outbox{}, srv
}

func TestSubscriberRoutes_optInAndPrefetchSafeUnsubscribe(t *testing.T) {
	ctx := context.Background()
	store, box, srv := newSubscriberEnv(t)
	SubscriberRoutes{Store: store, Notify: box.notify, PublicURL: "http://ds.test"}.Register(srv)

	in := subscriber.Subscriber{Name: "Ann", TimeZone: "Europe/Paris", Destinations: []subscriber.Destination{
		{Kind: subscriber.KindEmail, Address: "ann@example.com"}, {Kind: subscriber.KindSlack, Address: "https://hooks.slack.test/T1"}}}
	r := sendJSON(t, srv, "POST", "/v1/subscribers", in)
	if r.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	var s subscriber.Subscriber
	_ = json.Unmarshal(r.Body, &s)
	if s.Destinations[1].Secret == "" || s.Destinations[0].Status != subscriber.StatusPending {
		t.Fatalf("created %s", r.Body)
	}
	confirms := box.take()
	if len(confirms) != 2 || !confirms[0].Critical || confirms[0].Destination == nil || confirms[0].Destination.Address != "ann@example.com" {
		t.Fatalf("confirmation requests %+v", confirms)
	}
	// The same address again, spelled otherwise: 409.
	dup := subscriber.Subscriber{Name: "Eve", Destinations: []subscriber.Destination{{Kind: subscriber.KindEmail, Address: "ANN@example.com"}}}
	apitest.WantEnvelope(t, sendJSON(t, srv, "POST", "/v1/subscribers", dup), http.StatusConflict, "already_subscribed")
	apitest.WantEnvelope(t, sendJSON(t, srv, "POST", "/v1/subscribers", subscriber.Subscriber{Name: "x"}), http.StatusUnprocessableEntity, "invalid_subscriber")

	// A GET of the opt-in link (a prefetcher) shows a form and confirms nothing.
	confirmPath := linkPath(t, confirms[0])
	if r := apitest.Get(t, srv, confirmPath); r.Status != http.StatusOK || !strings.Contains(string(r.Body), `method="post"`) {
		t.Fatalf("GET confirm: %d %s", r.Status, r.Body)
	}
	stored, _ := store.Get(ctx, s.ID)
	if stored.Destinations[0].Status != subscriber.StatusPending {
		t.Fatal("a GET confirmed the destination")
	}
	if r := post(t, srv, confirmPath); r.Status != http.StatusOK {
		t.Fatalf("POST confirm: %d %s", r.Status, r.Body)
	}
	if r := post(t, srv, confirmPath); r.Status != http.StatusNotFound {
		t.Fatalf("second POST confirm: %d", r.Status)
	}
	full, _ := store.Resolve(ctx, s.ID)
	if full.Destinations[0].Status != subscriber.StatusActive {
		t.Fatalf("after POST: %+v", full.Destinations[0])
	}

	// Unsubscribe: GET shows a page, POST removes and sends a notice.
	unsubPath := notifier.UnsubscribePath + full.Destinations[0].UnsubscribeToken
	if r := apitest.Get(t, srv, unsubPath); r.Status != http.StatusOK || !strings.Contains(string(r.Body), "ann@example.com") {
		t.Fatalf("GET unsubscribe: %d %s", r.Status, r.Body)
	}
	if still, _ := store.Get(ctx, s.ID); len(still.Destinations) != 2 {
		t.Fatal("a GET unsubscribed")
	}
	if r := post(t, srv, unsubPath); r.Status != http.StatusOK {
		t.Fatalf("POST unsubscribe: %d %s", r.Status, r.Body)
	}
	notices := box.take()
	if len(notices) != 1 || notices[0].Event != "subscription.removed" || notices[0].Destination.Address != "ann@example.com" || !notices[0].Critical {
		t.Fatalf("removal notice %+v", notices)
	}
	left, _ := store.Get(ctx, s.ID)
	if len(left.Destinations) != 1 || left.Destinations[0].Kind != subscriber.KindSlack {
		t.Fatalf("after unsubscribe: %+v", left.Destinations)
	}
	if r := post(t, srv, unsubPath); r.Status != http.StatusNotFound {
		t.Fatalf("second unsubscribe: %d", r.Status)
	}

	// Preferences.
	bad := preferencesBody{TimeZone: "Nowhere/Land"}
	apitest.WantEnvelope(t, sendJSON(t, srv, "PUT", "/v1/subscribers/"+s.ID+"/preferences", bad), http.StatusUnprocessableEntity, "invalid_preferences")
	good := preferencesBody{TimeZone: "Asia/Tokyo", Preferences: subscriber.Preferences{QuietHours: &subscriber.QuietHours{Start: "22:00", End: "07:00"}}}
	if r := sendJSON(t, srv, "PUT", "/v1/subscribers/"+s.ID+"/preferences", good); r.Status != http.StatusOK || !strings.Contains(string(r.Body), "Asia/Tokyo") {
		t.Fatalf("preferences: %d %s", r.Status, r.Body)
	}
	apitest.WantEnvelope(t, apitest.Get(t, srv, "/v1/subscribers/s_nope"), http.StatusNotFound, "subscriber_not_found")
}

func TestNotificationRoutes_historyAndWhy(t *testing.T) {
	ctx := context.Background()
	rdb, err := stream.Dial(ctx, "redis://"+miniredis.RunT(t).Addr())
	if err != nil {
		t.Fatal(err)
	}
	rec, err := history.NewRecorder(rdb, nil, history.Config{})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	n := history.Record{ID: "n_1", Flow: "avail", Event: "availability.open", SubscriberID: "w_1", Channel: "webhook",
		Subject: "resy|v|2026-12-01|19:00|2", Window: "ev-1", Status: history.StatusSent, Attempts: 1, At: at,
		TraceID: "0af7651916cd43dd8448eb211c80319c", EventID: "ev-1", RunID: "run-1"}
	if err := rec.Record(ctx, n); err != nil {
		t.Fatal(err)
	}
	ch := testenv.ClickHouse(t)
	srv, _ := apitest.NewServer(t, api.Config{})
	NotificationRoutes{History: rec, Cause: func(ctx context.Context, e, r string) (clickhouse.Cause, error) {
		return clickhouse.NotificationCause(ctx, ch, e, r)
	}}.Register(srv)

	r := apitest.Get(t, srv, "/v1/notifications?subscriber=w_1")
	var page api.Page[history.Record]
	if err := json.Unmarshal(r.Body, &page); err != nil || r.Status != http.StatusOK || len(page.Items) != 1 || page.Items[0].ID != "n_1" {
		t.Fatalf("list: %d %s", r.Status, r.Body)
	}
	apitest.WantEnvelope(t, apitest.Get(t, srv, "/v1/notifications"), http.StatusBadRequest, "invalid_subscriber")
	apitest.WantEnvelope(t, apitest.Get(t, srv, "/v1/notifications/n_2/why"), http.StatusNotFound, "notification_not_found")

	// Before the analytics rows exist the chain is partial.
	var why whyChain
	r = apitest.Get(t, srv, "/v1/notifications/n_1/why")
	if err := json.Unmarshal(r.Body, &why); err != nil || why.Complete || why.Transition == nil || why.Transition.EventID != "ev-1" {
		t.Fatalf("partial why: %d %s", r.Status, r.Body)
	}
	if err := clickhouse.InsertTransitions(ctx, ch, []clickhouse.TransitionRow{{EventID: "ev-1", RunID: "run-1", RunAt: at, Kind: "open",
		Stable: true, EntityKey: n.Subject, TraceID: "1af7651916cd43dd8448eb211c80319c"}}); err != nil {
		t.Fatal(err)
	}
	if err := clickhouse.InsertRuns(ctx, ch, []clickhouse.RunRow{{RunID: "run-1", SourceID: "src", RunAt: at, Status: "ok",
		Applied: true, TraceID: "2af7651916cd43dd8448eb211c80319c"}}); err != nil {
		t.Fatal(err)
	}
	r = apitest.Get(t, srv, "/v1/notifications/n_1/why")
	why = whyChain{}
	if err := json.Unmarshal(r.Body, &why); err != nil || !why.Complete || why.Run == nil || why.Run.SourceID != "src" ||
		why.TraceID != "2af7651916cd43dd8448eb211c80319c" || why.Transition.EntityKey != n.Subject {
		t.Fatalf("why: %d %s", r.Status, r.Body)
	}
}

// The opt-in and unsubscribe links need no API key and are documented in
// /openapi.json as public HTML pages.
func TestSubscriberRoutes_linksArePublicAndDocumented(t *testing.T) {
	rdb, err := stream.Dial(context.Background(), "redis://"+miniredis.RunT(t).Addr())
	if err != nil {
		t.Fatal(err)
	}
	store, err := subscriber.NewStore(rdb, subscriber.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(api.Config{APIKeys: "r:read"})
	if err != nil {
		t.Fatal(err)
	}
	SubscriberRoutes{Store: store, Notify: (&outbox{}).notify, PublicURL: "http://ds.test"}.Register(srv)
	for _, path := range []string{notifier.ConfirmPath + "nope", notifier.UnsubscribePath + "nope"} {
		for _, method := range []string{"GET", "POST"} {
			req, _ := http.NewRequest(method, path, nil)
			if r := apitest.Do(t, srv, req); r.Status != http.StatusNotFound || !strings.Contains(string(r.Body), "Link expired") {
				t.Errorf("%s %s without a key: %d %s, want the expired-link page", method, path, r.Status, r.Body)
			}
		}
	}
	req, _ := http.NewRequest("GET", "/openapi.json", nil)
	r := apitest.Do(t, srv, req)
	var doc struct {
		Paths map[string]map[string]struct {
			Security  []any                      `json:"security"`
			Responses map[string]json.RawMessage `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(r.Body, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	for _, path := range []string{"/v1/confirm/{token}", "/v1/unsubscribe/{token}"} {
		for _, method := range []string{"get", "post"} {
			op, ok := doc.Paths[path][method]
			if !ok {
				t.Errorf("%s %s missing from openapi.json", method, path)
				continue
			}
			if op.Security == nil || len(op.Security) != 0 || !strings.Contains(string(op.Responses["200"]), "text/html") {
				t.Errorf("%s %s: security %v, 200 %s; want public, text/html", method, path, op.Security, op.Responses["200"])
			}
		}
	}
}

// A destination URL whose host is a denied address is refused with 422,
// and nothing is stored or sent (no confirmation POST to it).
func TestSubscriberRoutes_destinationOnADeniedAddressRefused(t *testing.T) {
	ctx := context.Background()
	store, box, srv := newSubscriberEnv(t)
	SubscriberRoutes{Store: store, Notify: box.notify, PublicURL: "http://ds.test"}.Register(srv)
	for _, addr := range []string{"http://127.0.0.1:9000/hook", "http://169.254.169.254/latest/meta-data/", "https://[::ffff:127.0.0.1]/x",
		"http://10.0.0.7/hook", "http://[::1]:8080/"} {
		in := subscriber.Subscriber{Name: "Mal", Destinations: []subscriber.Destination{
			{Kind: subscriber.KindEmail, Address: "mal@example.com"}, {Kind: subscriber.KindWebhook, Address: addr}}}
		e := apitest.WantEnvelope(t, sendJSON(t, srv, "POST", "/v1/subscribers", in), http.StatusUnprocessableEntity, "invalid_subscriber")
		if !strings.Contains(e.Message, "destinations[1].address") || !strings.Contains(e.Message, "denied") {
			t.Errorf("%s: message %q does not name the field and the denial", addr, e.Message)
		}
	}
	if subs, _, err := store.List(ctx, "", 10); err != nil || len(subs) != 0 {
		t.Errorf("stored %d subscribers (%v), want none", len(subs), err)
	}
	if reqs := box.take(); len(reqs) != 0 {
		t.Errorf("%d confirmation requests sent", len(reqs))
	}
	// A public address passes.
	in := subscriber.Subscriber{Name: "Ann", Destinations: []subscriber.Destination{{Kind: subscriber.KindWebhook, Address: "https://93.184.216.34/hook"}}}
	if r := sendJSON(t, srv, "POST", "/v1/subscribers", in); r.Status != http.StatusCreated {
		t.Errorf("public address: %d %s", r.Status, r.Body)
	}
}

func TestSubscriberRoutes_destinationOnAChannelNotConfiguredRefused(t *testing.T) {
	ctx := context.Background()
	store, box, srv := newSubscriberEnv(t)
	// No SMTP: the notifier has webhooks only.
	configured := map[string]bool{"webhook": true, "slack": true}
	SubscriberRoutes{Store: store, Notify: box.notify, PublicURL: "http://ds.test",
		HasChannel: func(ch string) bool { return configured[ch] }}.Register(srv)
	in := subscriber.Subscriber{Name: "Ann", Destinations: []subscriber.Destination{
		{Kind: subscriber.KindWebhook, Address: "https://hooks.example.com/ann"}, {Kind: subscriber.KindEmail, Address: "ann@example.com"}}}
	e := apitest.WantEnvelope(t, sendJSON(t, srv, "POST", "/v1/subscribers", in), http.StatusUnprocessableEntity, "channel_not_configured")
	if !strings.Contains(e.Message, "destinations[1].kind") || !strings.Contains(e.Message, "email") {
		t.Errorf("message %q does not name the field and the channel", e.Message)
	}
	if subs, _, err := store.List(ctx, "", 10); err != nil || len(subs) != 0 {
		t.Errorf("stored %d subscribers (%v), want none", len(subs), err)
	}
	if reqs := box.take(); len(reqs) != 0 {
		t.Errorf("%d confirmation requests sent, want none", len(reqs))
	}
	in.Destinations = in.Destinations[:1]
	if r := sendJSON(t, srv, "POST", "/v1/subscribers", in); r.Status != http.StatusCreated {
		t.Errorf("webhook only: %d %s, want 201", r.Status, r.Body)
	}
}

func TestSubscriberRoutes_capPerKey(t *testing.T) {
	rdb, err := stream.Dial(context.Background(), "redis://"+miniredis.RunT(t).Addr())
	if err != nil {
		t.Fatal(err)
	}
	q, err := quota.New(rdb, "subscribers", 2)
	if err != nil {
		t.Fatal(err)
	}
	store, err := subscriber.NewStore(rdb, subscriber.StoreConfig{Quota: q})
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := apitest.NewServer(t, api.Config{APIKeys: "w:write;w2:write"})
	box := &outbox{}
	SubscriberRoutes{Store: store, Notify: box.notify, PublicURL: "http://ds.test", Quota: q}.Register(srv)
	body := func(i int) any {
		return subscriber.Subscriber{Name: "s", TimeZone: "UTC", Destinations: []subscriber.Destination{
			{Kind: subscriber.KindEmail, Address: fmt.Sprintf("s%d@example.com", i)}}}
	}
	apitest.CheckCap(t, srv, apitest.Cap{Max: 2, Key: "w", OtherKey: "w2",
		Create: func(i int) (string, string, any) { return "POST", "/v1/subscribers", body(i) },
		ID:     func(t testing.TB, r apitest.Response) string { var s subscriber.Subscriber; r.JSON(t, &s); return s.ID },
		Delete: func(id string) string { return "/v1/subscribers/" + id },
	})
	// w holds its cap again. A subscriber whose last destination
	// unsubscribes is gone: its slot is free again.
	create := func(i int) apitest.Response {
		return apitest.Request(t, srv, "POST", "/v1/subscribers", body(i), api.HeaderAPIKey, "w")
	}
	apitest.WantEnvelope(t, create(100), http.StatusConflict, "quota_exceeded")
	var unsubscribed bool
	for _, req := range box.take() {
		if !strings.Contains(req.Text, notifier.ConfirmPath) || req.Destination.Address != "s1@example.com" {
			continue
		}
		if r := apitest.Request(t, srv, "POST", linkPath(t, req), nil); r.Status != http.StatusOK {
			t.Fatalf("confirm: %d %s", r.Status, r.Body)
		}
		s, err := store.Resolve(t.Context(), req.SubscriberID)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := store.Unsubscribe(t.Context(), s.Destinations[0].UnsubscribeToken); err != nil {
			t.Fatal(err)
		}
		unsubscribed = true
	}
	if !unsubscribed {
		t.Fatal("no confirmation request for s1@example.com")
	}
	if r := create(101); r.Status != http.StatusCreated {
		t.Errorf("create after w's subscriber unsubscribed = %d %s, want 201", r.Status, r.Body)
	}
}

// A subscriber's notifications page newest first with exact pages, and a
// walk started before new notifications arrive still sees each older one
// once.
func TestNotificationRoutes_pagesHoldWhileNotificationsArrive(t *testing.T) {
	ctx := context.Background()
	rdb, err := stream.Dial(ctx, "redis://"+miniredis.RunT(t).Addr())
	if err != nil {
		t.Fatal(err)
	}
	rec, err := history.NewRecorder(rdb, nil, history.Config{})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	record := func(i int) {
		t.Helper()
		if err := rec.Record(ctx, history.Record{ID: fmt.Sprintf("n_%02d", i), Flow: "avail", Event: "availability.open", SubscriberID: "w_1",
			Channel: "webhook", Subject: "s", Window: fmt.Sprint(i), Status: history.StatusSent, Attempts: 1, At: at.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 7 {
		record(i)
	}
	srv, _ := apitest.NewServer(t, api.Config{})
	NotificationRoutes{History: rec}.Register(srv)
	var got []string
	cursor := ""
	for pages := 0; pages < 10; pages++ {
		r := apitest.Get(t, srv, "/v1/notifications?subscriber=w_1&limit=3&cursor="+cursor)
		var page api.Page[history.Record]
		r.JSON(t, &page)
		if page.NextCursor != "" && len(page.Items) != 3 {
			t.Fatalf("page %d: %d items with a next cursor, want exactly 3", pages, len(page.Items))
		}
		for _, n := range page.Items {
			got = append(got, n.ID)
		}
		if pages == 0 {
			record(7) // a new notification arrives mid-walk, at the head
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	want := []string{"n_06", "n_05", "n_04", "n_03", "n_02", "n_01", "n_00"}
	if !slices.Equal(got, want) {
		t.Errorf("walk = %v, want %v: newest first, each once", got, want)
	}
	apitest.WantEnvelope(t, apitest.Get(t, srv, "/v1/notifications?subscriber=w_1&limit=0"), http.StatusBadRequest, "invalid_limit")
}
