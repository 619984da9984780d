package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/clickhouse/clickhousetest"
)

// Datasource types and uids of grafana/provisioning/datasources.
const (
	typeClickHouse = "grafana-clickhouse-datasource"
	typePrometheus = "prometheus"
)

type datasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type target struct {
	RefID      string        `json:"refId"`
	Datasource datasourceRef `json:"datasource"`
	RawSQL     string        `json:"rawSql"`
	Expr       string        `json:"expr"`
}

type panel struct {
	ID          int           `json:"id"`
	Type        string        `json:"type"`
	Title       string        `json:"title"`
	Description string        `json:"description"`
	Datasource  datasourceRef `json:"datasource"`
	Targets     []target      `json:"targets"`
	Panels      []panel       `json:"panels"` // rows
}

type dashboard struct {
	file   string
	UID    string  `json:"uid"`
	Title  string  `json:"title"`
	Panels []panel `json:"panels"`
}

// loadDashboards reads every JSON file of grafana/dashboards.
func loadDashboards(t *testing.T) []dashboard {
	t.Helper()
	files, err := filepath.Glob("grafana/dashboards/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards: %v", err)
	}
	var out []dashboard
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d dashboard
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		d.file = f
		out = append(out, d)
	}
	return out
}

// allPanels flattens rows.
func (d dashboard) allPanels() []panel {
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			out = append(out, p)
		}
	}
	walk(d.Panels)
	return out
}

// provisionedDatasources returns uid → type of the provisioned datasources.
func provisionedDatasources(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("grafana/provisioning/datasources/datasources.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := parseYAML(string(b))
	if err != nil {
		t.Fatalf("datasources.yaml: %v", err)
	}
	out := map[string]string{}
	for _, ds := range doc.(map[string]any)["datasources"].([]any) {
		m := ds.(map[string]any)
		out[m["uid"].(string)] = m["type"].(string)
	}
	return out
}

func TestDashboards_wellFormedAndOnProvisionedDatasources(t *testing.T) {
	dss := provisionedDatasources(t)
	if dss["clickhouse"] != typeClickHouse || dss["prometheus"] != typePrometheus {
		t.Fatalf("provisioned datasources %v: want clickhouse (%s) and prometheus", dss, typeClickHouse)
	}
	var titles, uids []string
	for _, d := range loadDashboards(t) {
		titles = append(titles, d.Title)
		if slices.Contains(uids, d.UID) || d.UID == "" {
			t.Errorf("%s: uid %q empty or repeated", d.file, d.UID)
		}
		uids = append(uids, d.UID)
		ids := map[int]bool{}
		for _, p := range d.allPanels() {
			if p.Title == "" || p.Description == "" {
				t.Errorf("%s: panel %d has no title or description", d.file, p.ID)
			}
			if ids[p.ID] {
				t.Errorf("%s: panel id %d repeated", d.file, p.ID)
			}
			ids[p.ID] = true
			if len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", d.file, p.Title)
			}
			for _, tg := range p.Targets {
				if got := dss[tg.Datasource.UID]; got == "" || got != tg.Datasource.Type {
					t.Errorf("%s: panel %q query %s uses datasource %+v, not provisioned", d.file, p.Title, tg.RefID, tg.Datasource)
				}
				if (tg.Datasource.Type == typeClickHouse) == (tg.RawSQL == "") || (tg.Datasource.Type == typePrometheus) == (tg.Expr == "") {
					t.Errorf("%s: panel %q query %s: rawSql for ClickHouse, expr for Prometheus", d.file, p.Title, tg.RefID)
				}
			}
		}
	}
	for _, want := range []string{"Availability", "Notifications", "Checkout", "Pipeline health"} {
		if !slices.Contains(titles, want) {
			t.Errorf("dashboard %q missing; have %v", want, titles)
		}
	}
}

// exportedMetrics are the Prometheus families a dashboard may use, each
// with the OTel instrument name it is exported from (dots for underscores,
// without the _total and _seconds suffixes). They were read from a running
// /metrics (dropstream demo with ClickHouse); the test checks that every
// instrument name is still created in the code.
var exportedMetrics = map[string]string{
	"dropstream_stage_messages_total":                   "dropstream.stage.messages",
	"dropstream_stage_handler_duration_seconds":         "dropstream.stage.handler.duration",
	"dropstream_stage_message_age_seconds":              "dropstream.stage.message.age",
	"dropstream_stage_lag":                              "dropstream.stage.lag",
	"dropstream_stage_pending":                          "dropstream.stage.pending",
	"dropstream_stage_pending_oldest_age_seconds":       "dropstream.stage.pending.oldest_age",
	"dropstream_collector_consecutive_failures":         "dropstream.collector.consecutive_failures",
	"dropstream_dlq_length":                             "dropstream.dlq.length",
	"dropstream_stage_paused":                           "dropstream.stage.paused",
	"dropstream_stage_conservation_drift":               "dropstream.stage.conservation.drift",
	"dropstream_stream_published_total":                 "dropstream.stream.published",
	"dropstream_e2e_latency_seconds":                    "dropstream.e2e.latency",
	"dropstream_notifier_notifications_total":           "dropstream.notifier.notifications",
	"dropstream_notifier_delivery_duration_seconds":     "dropstream.notifier.delivery.duration",
	"dropstream_collector_polls_total":                  "dropstream.collector.polls",
	"dropstream_writer_rows_total":                      "dropstream.writer.rows",
	"dropstream_writer_flush_errors_total":              "dropstream.writer.flush.errors",
	"dropstream_writer_flush_duration_seconds":          "dropstream.writer.flush.duration",
	"dropstream_writer_buffered":                        "dropstream.writer.buffered",
	"dropstream_writer_sink_failing_for_seconds":        "dropstream.writer.sink.failing_for",
	"dropstream_writer_flush_consecutive_failures":      "dropstream.writer.flush.consecutive_failures",
	"dropstream_feed_requests_total":                    "dropstream.feed.requests",
	"dropstream_feed_response_bytes_total":              "dropstream.feed.response.bytes",
	"dropstream_feed_schedules_total":                   "dropstream.feed.schedules",
	"dropstream_feed_duplicates_held_total":             "dropstream.feed.duplicates.held",
	"dropstream_feed_halts_total":                       "dropstream.feed.halts",
	"dropstream_feed_websub_total":                      "dropstream.feed.websub",
	"dropstream_feed_moved_total":                       "dropstream.feed.moved",
	"dropstream_checkout_conservation_drift":            "dropstream.checkout.conservation.drift",
	"dropstream_checkout_conservation_drifting":         "dropstream.checkout.conservation.drifting",
	"dropstream_availability_release_to_notice_seconds": "dropstream.availability.release_to_notice",
}

var metricRe = regexp.MustCompile(`\bdropstream_[a-z0-9_]+`)

func TestDashboards_prometheusQueriesUseExportedMetrics(t *testing.T) {
	src := goSource(t)
	for prom, inst := range exportedMetrics {
		if !strings.Contains(src, strconv.Quote(inst)) {
			t.Errorf("instrument %q (exported as %s) is not created anywhere in the code", inst, prom)
		}
	}
	n := 0
	for _, d := range loadDashboards(t) {
		for _, p := range d.allPanels() {
			for _, tg := range p.Targets {
				if tg.Datasource.Type != typePrometheus {
					continue
				}
				n++
				names := metricRe.FindAllString(tg.Expr, -1)
				if len(names) == 0 {
					t.Errorf("%s: panel %q: expr %q uses no dropstream metric", d.file, p.Title, tg.Expr)
				}
				for _, m := range names {
					family := m
					if h, ok := strings.CutSuffix(m, "_bucket"); ok && strings.HasSuffix(h, "_seconds") {
						family = h
					}
					if _, ok := exportedMetrics[family]; !ok {
						t.Errorf("%s: panel %q uses %s, which dropstream does not export", d.file, p.Title, m)
					}
				}
				if strings.Count(tg.Expr, "(") != strings.Count(tg.Expr, ")") {
					t.Errorf("%s: panel %q: unbalanced parentheses in %q", d.file, p.Title, tg.Expr)
				}
			}
		}
	}
	if n < 10 {
		t.Errorf("only %d Prometheus queries found", n)
	}
}

// goSource returns the text of every non-test Go file of the module.
func goSource(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			b.Write(src)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// Grafana's ClickHouse macros (grafana-clickhouse-datasource v4), as the
// plugin expands them for a range [from, to] in Unix seconds.
var (
	macroTimeFilter = regexp.MustCompile(`\$__timeFilter\(([^)]+)\)`)
	macroLeft       = regexp.MustCompile(`\$\{?\w+`)
)

func expandMacros(sql string, from, to time.Time) string {
	f, tt := strconv.FormatInt(from.Unix(), 10), strconv.FormatInt(to.Unix(), 10)
	sql = macroTimeFilter.ReplaceAllString(sql, "$1 >= toDateTime("+f+") AND $1 <= toDateTime("+tt+")")
	sql = strings.ReplaceAll(sql, "$__fromTime", "toDateTime("+f+")")
	sql = strings.ReplaceAll(sql, "$__toTime", "toDateTime("+tt+")")
	sql = strings.ReplaceAll(sql, "$__interval_s", "3600")
	return sql
}

// TestDashboards_clickHouseQueriesRun runs every ClickHouse query of every
// dashboard, macros expanded, against the migrated schema holding a day of
// rows of every raw table, and fails on any error or empty answer.
func TestDashboards_clickHouseQueriesRun(t *testing.T) {
	ctx := t.Context()
	ch := clickhousetest.Open(t)
	hour := time.Date(2024, 3, 10, 14, 0, 0, 0, time.UTC)
	loadRows(t, ch, hour)
	from, to := hour.Add(-24*time.Hour), hour.Add(24*time.Hour)
	n := 0
	for _, d := range loadDashboards(t) {
		for _, p := range d.allPanels() {
			for _, tg := range p.Targets {
				if tg.Datasource.Type != typeClickHouse {
					continue
				}
				n++
				sql := expandMacros(tg.RawSQL, from, to)
				if left := macroLeft.FindString(sql); left != "" {
					t.Errorf("%s: panel %q: macro or variable %s is not expanded by the test", d.file, p.Title, left)
					continue
				}
				rows, err := ch.Conn().Query(ctx, sql)
				if err != nil {
					t.Errorf("%s: panel %q: %v\n%s", d.file, p.Title, err, sql)
					continue
				}
				count := 0
				for rows.Next() {
					count++
				}
				err = rows.Err()
				rows.Close()
				if err != nil || count == 0 {
					t.Errorf("%s: panel %q: %d rows, %v\n%s", d.file, p.Title, count, err, sql)
				}
			}
		}
	}
	if n < 8 {
		t.Errorf("only %d ClickHouse queries found", n)
	}
}

// loadRows writes rows of every raw table a rollup reads (transitions,
// sessions, runs, notifications, checkout attempts, source health) around
// hour.
func loadRows(t *testing.T, ch *clickhouse.Client, hour time.Time) {
	t.Helper()
	ctx := t.Context()
	var trs []clickhouse.TransitionRow
	var sess []clickhouse.SessionRow
	var runs []clickhouse.RunRow
	for i := range 40 {
		at := hour.Add(time.Duration(i-20) * 17 * time.Minute)
		venue := fmt.Sprintf("v%d", i%5)
		kind := []string{"open", "close"}[i%2]
		trs = append(trs, clickhouse.TransitionRow{EventID: fmt.Sprintf("e%d", i), RunID: fmt.Sprintf("r%d", i), RunAt: at, Kind: kind,
			Raw: true, Stable: i%3 == 0, EntityKey: "k" + venue, Provider: "resy", Venue: venue, VenueName: "Venue " + venue,
			ScopeKey: "s-" + venue, LastSeen: at})
		sess = append(sess, clickhouse.SessionRow{SessionID: fmt.Sprintf("s%d", i), EntityKey: "k" + venue, Provider: "resy", Venue: venue,
			OpenedAt: at, Closed: i%4 != 0, ClosedAt: at.Add(time.Duration(i+1) * time.Minute), Duration: time.Duration(i+1) * time.Minute})
		runs = append(runs, clickhouse.RunRow{RunID: fmt.Sprintf("r%d", i), SourceID: fmt.Sprintf("src%d", i%3), Provider: "resy",
			RunAt: at, StartedAt: at, Status: []string{"ok", "ok", "failed"}[i%3], Applied: true})
	}
	for _, err := range []error{clickhouse.InsertTransitions(ctx, ch, trs), clickhouse.InsertSessions(ctx, ch, sess), clickhouse.InsertRuns(ctx, ch, runs)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	var notes []clickhouse.NotificationRow
	var sagas []clickhouse.CheckoutSagaRow
	for i := range 20 {
		at := hour.Add(time.Duration(i-10) * 23 * time.Minute)
		notes = append(notes, clickhouse.NotificationRow{NotificationID: fmt.Sprintf("n%d", i), Flow: []string{"avail", "comic"}[i%2],
			Event: "open", SubscriberID: "s", Channel: []string{"webhook", "email"}[i%2], Status: []string{"sent", "sent", "failed", "held"}[i%4],
			ObservedAt: at, RecordedAt: at.Add(time.Second), LatencyMs: uint64(1000 + i)})
		sagas = append(sagas, clickhouse.CheckoutSagaRow{OrderID: fmt.Sprintf("o%d", i/2), TrNum: uint32(i%2 + 1), UserID: "u",
			Status: []string{"failed", "succeeded"}[i%2], TotalCost: 10, Parts: 2, Compensated: uint16(1 - i%2),
			StartedAt: at, FinishedAt: at.Add(time.Second), Decide: time.Duration(i) * time.Millisecond, Duration: time.Second})
	}
	if err := clickhouse.InsertNotifications(ctx, ch, notes); err != nil {
		t.Fatal(err)
	}
	if err := clickhouse.InsertCheckoutSagas(ctx, ch, sagas); err != nil {
		t.Fatal(err)
	}
	var health []clickhouse.SourceHealthRow
	for i := range 6 {
		at := hour.Add(time.Duration(i-3) * 31 * time.Minute)
		health = append(health, clickhouse.SourceHealthRow{EventID: fmt.Sprintf("h%d", i), SourceID: fmt.Sprintf("src%d", i%2), Provider: "resy",
			Status: []string{"down", "down", "up", "up"}[i%4], RunID: fmt.Sprintf("hr%d", i), At: at, BlindSince: at.Add(-10 * time.Minute),
			BlindForSeconds: uint32(600 * (i % 3))})
	}
	if err := clickhouse.InsertSourceHealth(ctx, ch, health); err != nil {
		t.Fatal(err)
	}
}
