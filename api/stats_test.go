package api

import (
	"net/http"
	"testing"
	"time"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/internal/testenv"
)

// statsServer serves the stats routes over a fresh migrated ClickHouse
// database holding, in the hour 2024-03-10 14:00 UTC, 2 notifications of
// flow "comic" sent over webhook (one recorded twice).
func statsServer(t *testing.T) *Server {
	t.Helper()
	ctx := t.Context()
	ch, err := clickhouse.Open(ctx, clickhouse.Config{DSN: testenv.ClickHouseDSN(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ch.Close() })
	if _, err := clickhouse.Migrate(ctx, ch, nil); err != nil {
		t.Fatal(err)
	}
	hour := time.Date(2024, 3, 10, 14, 0, 0, 0, time.UTC)
	var notes []clickhouse.NotificationRow
	for i, id := range []string{"n1", "n2", "n1"} {
		notes = append(notes, clickhouse.NotificationRow{NotificationID: id, Flow: "comic", Event: "comic.new", SubscriberID: "s",
			Channel: "webhook", Status: "sent", ObservedAt: hour, RecordedAt: hour.Add(time.Duration(i) * time.Minute), LatencyMs: 2000})
	}
	if err := clickhouse.InsertNotifications(ctx, ch, notes); err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{APIKeys: "r:read"})
	if err != nil {
		t.Fatal(err)
	}
	StatsRoutes{ClickHouse: ch, Now: func() time.Time { return hour.Add(90 * time.Minute) }}.Register(srv)
	return srv
}

func TestStatsRoutes_notifications(t *testing.T) {
	srv := statsServer(t)
	var notes notificationStats
	call(t, srv, "GET", "/v1/stats/notifications?group_by=channel&flow=comic", "r", "", &notes)
	want := notificationRow{Key: statsKey{Value: "webhook"}, Notifications: 2, Sent: 2, LatencyP50Ms: 2000, LatencyP90Ms: 2000, LatencyP99Ms: 2000}
	if len(notes.Items) != 1 || notes.Items[0] != want {
		t.Errorf("notifications by channel = %+v, want %+v (a notification recorded twice counts once)", notes.Items, want)
	}
}

func TestStatsRoutes_rejectBadParameters(t *testing.T) {
	srv := statsServer(t)
	long := make([]byte, 300)
	for i := range long {
		long[i] = 'a'
	}
	tests := []struct{ path, code string }{
		{"/v1/stats/notifications?from=2000-01-01T00:00:00Z&to=2024-03-10T00:00:00Z", "invalid_range"},
		{"/v1/stats/notifications?limit=0", "invalid_limit"},
		{"/v1/stats/notifications?group_by=venue", "invalid_group_by"},
		{"/v1/stats/notifications?provider=resy", "invalid_query"},
		{"/v1/stats/notifications?venue=" + string(long), "invalid_filter"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			var out struct {
				Error struct{ Code string } `json:"error"`
			}
			if code := call(t, srv, "GET", tt.path, "r", "", &out); code != http.StatusBadRequest || out.Error.Code != tt.code {
				t.Errorf("%s: %d %q, want 400 %q", tt.path, code, out.Error.Code, tt.code)
			}
		})
	}
	if code := call(t, srv, "GET", "/v1/stats/notifications", "", "", nil); code != http.StatusUnauthorized {
		t.Errorf("without a key: %d, want 401", code)
	}
}
