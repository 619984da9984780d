package httpapi

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/api/apitest"
	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/internal/testenv"
)

// statsServer serves the availability stats route over a fresh migrated
// ClickHouse database holding, in the hour 2024-03-10 14:00 UTC: 3 raw opens and 1
// close at venue v0, 1 raw open at v1, two closed sessions at v0 (10 s and
// 30 s), and 2 notifications of flow "comic" sent over webhook (one
// recorded twice).
func statsServer(t *testing.T) *api.Server {
	t.Helper()
	ctx := t.Context()
	ch := testenv.ClickHouse(t)
	hour := time.Date(2024, 3, 10, 14, 0, 0, 0, time.UTC)
	var trs []clickhouse.TransitionRow
	for i, v := range []struct{ venue, kind string }{{"v0", "open"}, {"v0", "open"}, {"v0", "open"}, {"v0", "close"}, {"v1", "open"}} {
		at := hour.Add(time.Duration(i) * time.Minute)
		trs = append(trs, clickhouse.TransitionRow{EventID: fmt.Sprintf("e%d", i), RunID: "r", RunAt: at, Kind: v.kind, Raw: true,
			EntityKey: "k" + v.venue, Provider: "resy", Venue: v.venue, ScopeKey: "s-" + v.venue, LastSeen: at})
	}
	var sess []clickhouse.SessionRow
	for i, d := range []time.Duration{10 * time.Second, 30 * time.Second} {
		at := hour.Add(time.Duration(i) * time.Minute)
		sess = append(sess, clickhouse.SessionRow{SessionID: fmt.Sprintf("s%d", i), EntityKey: "kv0", Provider: "resy", Venue: "v0",
			OpenedAt: at, Closed: true, ClosedAt: at.Add(d), Duration: d})
	}
	if err := clickhouse.InsertTransitions(ctx, ch, trs); err != nil {
		t.Fatal(err)
	}
	if err := clickhouse.InsertSessions(ctx, ch, sess); err != nil {
		t.Fatal(err)
	}
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

func TestStatsRoutes_availability(t *testing.T) {
	srv := statsServer(t)
	var byVenue availabilityStats
	if code := call(t, srv, "GET", "/v1/stats/availability?group_by=venue&provider=resy", "r", "", &byVenue); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	if len(byVenue.Items) != 2 || byVenue.Items[0] != (availabilityRow{Key: api.StatsKey{Value: "v0"}, Opens: 3, Closes: 1}) ||
		byVenue.Items[1] != (availabilityRow{Key: api.StatsKey{Value: "v1"}, Opens: 1}) {
		t.Errorf("items by venue = %+v", byVenue.Items)
	}
	if len(byVenue.Sessions) != 1 || byVenue.Sessions[0].Sessions != 2 || byVenue.Sessions[0].TotalMs != 40000 || byVenue.Sessions[0].MeanMs != 20000 {
		t.Errorf("sessions by venue = %+v, want v0: 2 sessions, 40 s in all", byVenue.Sessions)
	}
	if byVenue.From != "2024-03-09T15:30:00Z" || byVenue.To != "2024-03-10T15:30:00Z" {
		t.Errorf("default range %s..%s, want the 24 hours before now", byVenue.From, byVenue.To)
	}
	var byHour availabilityStats
	call(t, srv, "GET", "/v1/stats/availability?from=2024-03-10T00:00:00Z&to=1710115200&group_by=hour", "r", "", &byHour)
	if len(byHour.Items) != 1 || byHour.Items[0] != (availabilityRow{Key: api.StatsKey{Time: "2024-03-10T14:00:00Z"}, Opens: 4, Closes: 1, NotificationsSent: 2}) ||
		len(byHour.Sessions) != 0 {
		t.Errorf("by hour = %+v, want one row for 14:00 (both flows) and no sessions", byHour)
	}
	var byFlow availabilityStats
	call(t, srv, "GET", "/v1/stats/availability?group_by=flow", "r", "", &byFlow)
	if len(byFlow.Items) != 2 || byFlow.Items[0] != (availabilityRow{Key: api.StatsKey{Value: "avail"}, Opens: 4, Closes: 1}) {
		t.Errorf("by flow = %+v", byFlow.Items)
	}
}

func TestStatsRoutes_rejectBadParameters(t *testing.T) {
	srv := statsServer(t)
	long := make([]byte, 300)
	for i := range long {
		long[i] = 'a'
	}
	tests := []struct{ path, code string }{
		{"/v1/stats/availability?group_by=entity", "invalid_group_by"},
		{"/v1/stats/availability?from=yesterday", "invalid_from"},
		{"/v1/stats/availability?to=2024-13-01T00:00:00Z", "invalid_to"},
		{"/v1/stats/availability?from=2024-03-11T00:00:00Z&to=2024-03-10T00:00:00Z", "invalid_range"},
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
	if code := call(t, srv, "GET", "/v1/stats/availability", "", "", nil); code != http.StatusUnauthorized {
		t.Errorf("without a key: %d, want 401", code)
	}
}
