package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/avail/availjson"
	"github.com/dropstream/dropstream/collector"
	"github.com/dropstream/dropstream/diff"
	"github.com/dropstream/dropstream/flows/avail/watch"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer"
)

// partitions is the partition count of every availability topic here.
const partitions = 4

// group is one consumer group of the pipeline.
type group struct {
	topic stream.Topic
	name  string
}

// pipelineGroups are the groups of every availability stage, upstream
// first: a stage acknowledges a message only after publishing what it
// derives from it, so checking them in this order proves the whole
// pipeline settled.
func pipelineGroups(topics avail.Topics) []group {
	return []group{
		{topics.Raw, collector.NormalizerStage},
		{topics.Snapshots, diff.StageName},
		{topics.Transitions, writer.StageProjection},
		{topics.Transitions, watch.StageNotifier},
		{topics.Transitions, writer.StageAnalyticsTransitions},
		{topics.Runs, writer.StageAnalyticsRuns},
	}
}

// busy returns "" when every group has received and acknowledged every
// entry of every partition (XINFO GROUPS: pending 0 and lag 0), or else
// what is still busy.
func busy(ctx context.Context, rdb redis.UniversalClient, groups []group) string {
	for _, g := range groups {
		for p := 0; p < g.topic.Partitions; p++ {
			name := g.topic.Stream(p)
			info, err := groupInfo(ctx, rdb, name, g.name)
			if err != nil {
				return err.Error()
			}
			if info.Pending != 0 {
				return fmt.Sprintf("%s %s: pending %d, lag %d", name, g.name, info.Pending, info.Lag)
			}
			if why := received(ctx, rdb, name, info); why != "" {
				return why
			}
		}
	}
	return ""
}

// received returns "" when the group of info has been delivered every
// entry of the stream (lag 0), or else why not.
func received(ctx context.Context, rdb redis.UniversalClient, streamKey string, info redis.XInfoGroup) string {
	name := info.Name
	switch {
	case info.Lag > 0:
		return fmt.Sprintf("%s %s: lag %d", streamKey, name, info.Lag)
	case info.Lag < 0: // unknown to Redis: compare the ids
		s, err := rdb.XInfoStream(ctx, streamKey).Result()
		if err != nil {
			return err.Error()
		}
		if s.LastGeneratedID != info.LastDeliveredID {
			return fmt.Sprintf("%s %s: delivered up to %s of %s", streamKey, name, info.LastDeliveredID, s.LastGeneratedID)
		}
	}
	return ""
}

// reason is the last answer of a polled condition, printed when WaitFor
// gives up.
type reason struct{ s string }

// set records why the condition does not hold ("" when it does) and
// reports whether it holds.
func (r *reason) set(why string) bool { r.s = why; return why == "" }

func (r *reason) String() string { return r.s }

// groupInfo returns the XINFO GROUPS entry of one group of one stream.
func groupInfo(ctx context.Context, rdb redis.UniversalClient, streamKey, name string) (redis.XInfoGroup, error) {
	infos, err := rdb.XInfoGroups(ctx, streamKey).Result()
	if err != nil {
		return redis.XInfoGroup{}, fmt.Errorf("%s: %w", streamKey, err)
	}
	for _, info := range infos {
		if info.Name == name {
			return info, nil
		}
	}
	return redis.XInfoGroup{}, fmt.Errorf("%s: no group %s yet", streamKey, name)
}

// entry is one stream entry.
type entry struct {
	typ     string
	payload []byte
	traceID string // from the entry's traceparent
}

// readTopic returns every entry of a topic, partition after partition.
func readTopic(t testing.TB, ctx context.Context, rdb redis.UniversalClient, topic stream.Topic) []entry {
	t.Helper()
	var out []entry
	for p := 0; p < topic.Partitions; p++ {
		xs, err := rdb.XRange(ctx, topic.Stream(p), "-", "+").Result()
		if err != nil {
			t.Fatalf("XRANGE %s: %v", topic.Stream(p), err)
		}
		for _, x := range xs {
			e := entry{}
			e.typ, _ = x.Values["type"].(string)
			payload, _ := x.Values["payload"].(string)
			e.payload = []byte(payload)
			tp, _ := x.Values[stream.MetaTraceParent].(string)
			if parts := strings.Split(tp, "-"); len(parts) == 4 {
				e.traceID = parts[1]
			}
			out = append(out, e)
		}
	}
	return out
}

// decodeAll decodes the payloads of entries of type typ into Ts.
func decodeAll[T any](t testing.TB, entries []entry, typ string) []T {
	t.Helper()
	var out []T
	for _, e := range entries {
		if e.typ != typ {
			t.Fatalf("entry of type %q where %q was expected", e.typ, typ)
		}
		var v T
		if err := json.Unmarshal(e.payload, &v); err != nil {
			t.Fatalf("decode %s: %v", typ, err)
		}
		out = append(out, v)
	}
	return out
}

// decodeTransitions decodes entries of the transition topic: the diff's
// runs with their transitions and the collector's single source
// transitions. runs holds the run records, once per entry.
func decodeTransitions(t testing.TB, entries []entry) (ts []avail.Transition, runs []avail.RunRecord) {
	t.Helper()
	for _, e := range entries {
		run, more, err := availjson.DecodeRunTransitions(e.typ, e.payload)
		if err != nil {
			t.Fatalf("decode %s entry: %v", e.typ, err)
		}
		ts = append(ts, more...)
		if run != nil {
			runs = append(runs, *run)
		}
	}
	return ts, runs
}

// emitted is what the diff emitted, read back from its output streams.
type emitted struct {
	transitions []avail.Transition
	events      map[string]bool // distinct transition event ids
	runIDs      map[string]bool // distinct run ids of run records
	applied     map[string]bool // run ids with an applied run record
	rawOpens    int
	rawCloses   int
}

func readEmitted(t testing.TB, ctx context.Context, rdb redis.UniversalClient, topics avail.Topics) emitted {
	t.Helper()
	em := emitted{events: map[string]bool{}, runIDs: map[string]bool{}, applied: map[string]bool{}}
	var withTransitions []avail.RunRecord
	em.transitions, withTransitions = decodeTransitions(t, readTopic(t, ctx, rdb, topics.Transitions))
	for _, tr := range em.transitions {
		if em.events[tr.EventID] {
			t.Errorf("transition %s (%s %s of run %s) emitted twice", tr.EventID, tr.Kind, tr.Entity.Key, tr.RunID)
		}
		em.events[tr.EventID] = true
		switch {
		case tr.Raw && tr.Kind == avail.KindOpen:
			em.rawOpens++
		case tr.Raw && tr.Kind == avail.KindClose:
			em.rawCloses++
		}
	}
	for _, r := range append(decodeAll[avail.RunRecord](t, readTopic(t, ctx, rdb, topics.Runs), avail.TypeRun), withTransitions...) {
		em.runIDs[r.RunID] = true
		if r.Applied {
			em.applied[r.RunID] = true
		}
	}
	return em
}

// delivery is one webhook request the receiver accepted.
type delivery struct {
	watcher, event, session, entity string
	traceID, headerTraceID          string
}

// webhook is the receiver of every watcher: it checks each request's
// signature with the watcher's secret and records what it received.
type webhook struct {
	srv *httptest.Server

	mu      sync.Mutex
	secrets map[string]string // watcher id → secret
	got     []delivery
	bad     []string
}

func newWebhook(t *testing.T) *webhook {
	h := &webhook{secrets: map[string]string{}}
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *webhook) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	h.mu.Lock()
	defer h.mu.Unlock()
	var ev watch.OpenEvent
	if err == nil {
		err = json.Unmarshal(body, &ev)
	}
	switch {
	case err != nil:
		h.bad = append(h.bad, fmt.Sprintf("body %q: %v", body, err))
	case r.Header.Get(notifier.HeaderWebhookID) != ev.EventID:
		h.bad = append(h.bad, fmt.Sprintf("event id header %q, body %q", r.Header.Get(notifier.HeaderWebhookID), ev.EventID))
	}
	if err := verifyWebhook(h.secrets[ev.WatcherID], r.Header, body); err != nil {
		h.bad = append(h.bad, fmt.Sprintf("watcher %q event %s: %v", ev.WatcherID, ev.EventID, err))
	}
	d := delivery{watcher: ev.WatcherID, event: ev.EventID, session: ev.SessionID, entity: ev.Entity.Key, traceID: ev.TraceID}
	if parts := strings.Split(r.Header.Get("traceparent"), "-"); len(parts) == 4 {
		d.headerTraceID = parts[1]
	}
	h.got = append(h.got, d)
	w.WriteHeader(http.StatusNoContent)
}

// deliveries returns what was received so far and the signature or header
// problems seen.
func (h *webhook) deliveries() ([]delivery, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]delivery(nil), h.got...), append([]string(nil), h.bad...)
}

// addWatchers creates one webhook watcher per simulated venue and returns
// their ids by venue.
func (h *webhook) addWatchers(t *testing.T, ctx context.Context, store *watch.Store, provider string, venues []string) map[string]string {
	t.Helper()
	ids := map[string]string{}
	for _, v := range venues {
		w, err := store.Create(ctx, watch.Watcher{Name: "venue " + v, Provider: provider, Venue: v,
			Channel: notifier.ChannelWebhook, WebhookURL: h.srv.URL + "/hooks/" + v})
		if err != nil {
			t.Fatalf("create watcher of venue %s: %v", v, err)
		}
		h.mu.Lock()
		h.secrets[w.ID] = w.Secret
		h.mu.Unlock()
		ids[v] = w.ID
	}
	return ids
}

// listKeys returns the keys of every projected entity in a state, reading
// every page.
func listKeys(t testing.TB, ctx context.Context, proj *writer.Projection, state string) map[string]bool {
	t.Helper()
	keys := map[string]bool{}
	cursor := ""
	for {
		page, next, err := proj.List(ctx, writer.Filter{State: state}, cursor, writer.MaxListLimit)
		if err != nil {
			t.Fatalf("list %s entities: %v", state, err)
		}
		for _, e := range page {
			if keys[e.Key] {
				t.Errorf("entity %s listed twice", e.Key)
			}
			keys[e.Key] = true
		}
		if next == "" {
			return keys
		}
		cursor = next
	}
}

// verifyWebhook checks a webhook's Standard Webhooks signature with the
// specification's library. As the notifier signs: the key is the base64
// after "whsec_", else the secret's bytes (a comic subscription's secret).
func verifyWebhook(secret string, h http.Header, body []byte) error {
	wh, err := standardwebhooks.NewWebhookRaw([]byte(secret))
	if strings.HasPrefix(secret, "whsec_") {
		wh, err = standardwebhooks.NewWebhook(secret)
	}
	if err != nil {
		return err
	}
	return wh.Verify(body, h)
}
