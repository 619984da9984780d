package clickhouse_test

import (
	"slices"
	"testing"
	"time"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/clickhouse/clickhousetest"
)

func TestRollups_notificationsAndCheckout(t *testing.T) {
	c := migrated(t)
	ctx := t.Context()
	hour := time.Date(2024, 5, 2, 9, 0, 0, 0, time.UTC)
	note := func(id, status string, at time.Duration, latency uint64) clickhouse.NotificationRow {
		return clickhouse.NotificationRow{NotificationID: id, Flow: "comic", Event: "comic.new", SubscriberID: "s", Channel: "webhook",
			Status: status, ObservedAt: hour, RecordedAt: hour.Add(at), LatencyMs: latency}
	}
	// n1 failed then was sent, n2 sent (written twice), n3 suppressed.
	notes := []clickhouse.NotificationRow{note("n1", "failed", time.Minute, 0), note("n1", "sent", 2*time.Minute, 1000),
		note("n2", "sent", 3*time.Minute, 3000), note("n2", "sent", 3*time.Minute, 3000), note("n3", "suppressed", 4*time.Minute, 0)}
	attempt := func(order string, tr uint32, status string, cost int64, comp uint16) clickhouse.CheckoutSagaRow {
		return clickhouse.CheckoutSagaRow{OrderID: order, TrNum: tr, UserID: "u", Status: status, TotalCost: cost, Parts: 2, Compensated: comp,
			StartedAt: hour, FinishedAt: hour.Add(time.Second), Decide: 200 * time.Millisecond, Duration: time.Second}
	}
	sagas := []clickhouse.CheckoutSagaRow{attempt("o1", 1, "failed", 100, 1), attempt("o1", 2, "succeeded", 100, 0),
		attempt("o2", 1, "succeeded", 50, 0)}
	if err := clickhouse.InsertNotifications(ctx, c, notes); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second insert is a redelivered batch
		if err := clickhouse.InsertCheckoutSagas(ctx, c, sagas); err != nil {
			t.Fatal(err)
		}
	}
	q := clickhouse.StatsQuery{From: hour.Add(-time.Hour), To: hour.Add(time.Hour)}
	check := func(wantRevenue int64) {
		t.Helper()
		q.GroupBy = clickhouse.GroupChannel
		ns, err := clickhouse.NotificationStats(ctx, c, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(ns) != 1 || ns[0].Key.Value != "webhook" || ns[0].Notifications != 3 || ns[0].Sent != 2 || ns[0].Failed != 1 ||
			ns[0].Suppressed != 1 || ns[0].Held != 0 {
			t.Errorf("NotificationStats = %+v, want webhook: 3 notifications, 2 sent, 1 failed, 1 suppressed", ns)
		} else if ns[0].LatencyP50 < time.Second || ns[0].LatencyP99 > 3*time.Second {
			t.Errorf("latency quantiles %v..%v outside 1s..3s", ns[0].LatencyP50, ns[0].LatencyP99)
		}
		q.GroupBy = clickhouse.GroupFlow
		fs, err := clickhouse.FlowStats(ctx, c, q)
		if err != nil {
			t.Fatal(err)
		}
		if want := []clickhouse.FlowStat{{Key: clickhouse.StatKey{Value: "comic"}, NotificationsSent: 2}}; !slices.Equal(fs, want) {
			t.Errorf("FlowStats = %+v, want %+v", fs, want)
		}
		q.GroupBy = clickhouse.GroupHour
		cs, err := clickhousetest.CheckoutHourly(ctx, c, q.From, q.To)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != 1 || cs[0].Attempts != 3 || cs[0].Orders != 2 || cs[0].Succeeded != 2 || cs[0].Failed != 1 ||
			cs[0].Compensated != 1 || cs[0].Retries != 1 || cs[0].Revenue != wantRevenue || cs[0].DurationP50 != time.Second {
			t.Errorf("CheckoutHourly = %+v, want 3 attempts of 2 orders, 2 succeeded, 1 failed and compensated, 1 retry, revenue %d, 1s",
				cs, wantRevenue)
		}
	}
	// The view saw the redelivered attempts: counts are exact, the revenue
	// sum doubled until the month is rebuilt from the raw rows (FINAL).
	check(300)
	if err := clickhouse.Rebuild(ctx, c, clickhouse.RebuildConfig{}); err != nil {
		t.Fatal(err)
	}
	check(150)
	if _, err := clickhouse.NotificationStats(ctx, c, clickhouse.StatsQuery{From: q.From, To: q.To, GroupBy: clickhouse.GroupHour, Venue: "v"}); err == nil {
		t.Error("NotificationStats accepted a venue filter")
	}
}
