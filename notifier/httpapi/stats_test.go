package httpapi

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/api/apitest"
	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/internal/testenv"
)

// statsServer serves the notification stats route over a fresh migrated
// ClickHouse database holding, in the hour 2024-03-10 14:00 UTC, 2
// notifications of flow "comic" sent over webhook (one recorded twice).
func statsServer(t *testing.T) *api.Server {
	t.Helper()
	ctx := t.Context()
	ch := testenv.ClickHouse(t)
	hour := time.Date(2024, 3, 10, 14, 0, 0, 0, time.UTC)
	var notes []clickhouse.NotificationRow
	for i, id := range []string{"n1", "n2", "n1"} {
		notes = append(notes, clickhouse.NotificationRow{NotificationID: id, Flow: "comic", Event: "comic.new", SubscriberID: "s",
			Channel: "webhook", Status: "sent", ObservedAt: hour, RecordedAt: hour.Add(time.Duration(i) * time.Minute), LatencyMs: 2000})
	}
	if err := clickhouse.InsertNotifications(ctx, ch, notes); err != nil {
		t.Fatal(err)
	}
	srv, _ := apitest.NewServer(t, api.Config{APIKeys: "r:read"})
	StatsRoutes{ClickHouse: ch, Now: func() time.Time { return hour.Add(90 * time.Minute) }}.Register(srv)
	return srv
}

func TestStatsRoutes_notifications(t *testing.T) {
	srv := statsServer(t)
	r := apitest.Request(t, srv, "GET", "/v1/stats/notifications?group_by=channel&flow=comic", nil, api.HeaderAPIKey, "r")
	var notes notificationStats
	r.JSON(t, &notes)
	want := notificationRow{Key: api.StatsKey{Value: "webhook"}, Notifications: 2, Sent: 2, LatencyP50Ms: 2000, LatencyP90Ms: 2000, LatencyP99Ms: 2000}
	if r.Status != http.StatusOK || len(notes.Items) != 1 || notes.Items[0] != want {
		t.Errorf("notifications by channel = %d %+v, want %+v (a notification recorded twice counts once)", r.Status, notes.Items, want)
	}
}

func TestStatsRoutes_rejectBadParameters(t *testing.T) {
	srv := statsServer(t)
	long := strings.Repeat("a", 300)
	tests := []struct{ path, code string }{
		{"/v1/stats/notifications?from=2000-01-01T00:00:00Z&to=2024-03-10T00:00:00Z", "invalid_range"},
		{"/v1/stats/notifications?limit=0", "invalid_limit"},
		{"/v1/stats/notifications?group_by=venue", "invalid_group_by"},
		{"/v1/stats/notifications?provider=resy", "invalid_query"},
		{"/v1/stats/notifications?venue=" + long, "invalid_filter"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			apitest.WantEnvelope(t, apitest.Request(t, srv, "GET", tt.path, nil, api.HeaderAPIKey, "r"), http.StatusBadRequest, tt.code)
		})
	}
	if r := apitest.Get(t, srv, "/v1/stats/notifications"); r.Status != http.StatusUnauthorized {
		t.Errorf("without a key: %d, want 401", r.Status)
	}
}
