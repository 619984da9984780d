package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/flows/comic"
	"github.com/dropstream/dropstream/notifier"
)

// crashReceipt is one request the receiver got.
type crashReceipt struct {
	id   string // webhook-id
	pair [2]string
	sub  string // the notification's subscriber id
	at   time.Time
}

// crashKill is what the receiver saw at a kill of the notifier.
type crashKill struct {
	count  int       // the request whose arrival killed it (requests begun so far)
	active int       // requests begun, not yet answered (their answer not written out)
	at     time.Time // when the process was gone
}

// crashReceiver is the webhook of every subscription: it verifies each
// request's Standard Webhooks signature with its subscription's secret,
// keeps every request, and kills the notifier (SIGKILL, waiting until it
// is gone) on the arrival of the requests numbered in killAt, once armed,
// while holding its lock: no request is answered meanwhile, so the
// requests it counts as active at a kill were all in flight then.
type crashReceiver struct {
	t       *testing.T
	secrets map[string]string // path → secret, set before any request

	mu       sync.Mutex
	begun    int
	active   int
	got      []crashReceipt
	bad      []string
	killAt   []int
	armed    bool
	notifier *proc
	kills    []crashKill
	killed   chan struct{} // a value per kill
}

func (r *crashReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	path := strings.TrimPrefix(req.URL.Path, "/notify/")
	var m notifier.Message
	var nb comic.NotifyBody
	id := req.Header.Get(notifier.HeaderWebhookID)
	problem := ""
	switch {
	case verifyWebhook(r.secrets[path], req.Header, body) != nil:
		problem = "signature does not verify"
	case json.Unmarshal(body, &m) != nil || json.Unmarshal(m.Payload, &nb) != nil || m.ID != id:
		problem = "body is not a comic notification of the webhook-id"
	}
	r.mu.Lock()
	r.begun++
	r.active++
	r.got = append(r.got, crashReceipt{id: id, pair: [2]string{nb.ComicID, nb.Email}, sub: m.SubscriberID, at: time.Now()})
	if problem != "" {
		r.bad = append(r.bad, fmt.Sprintf("request %d to %s: %s", r.begun, path, problem))
	}
	if r.armed && len(r.killAt) > 0 && r.begun >= r.killAt[0] {
		r.notifier.kill()
		r.kills = append(r.kills, crashKill{count: r.begun, active: r.active, at: time.Now()})
		r.killAt, r.armed = r.killAt[1:], false
		r.killed <- struct{}{}
	}
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	r.mu.Lock()
	r.active--
	r.mu.Unlock()
}

// restarted sets the notifier process that a next kill ends, and arms it.
func (r *crashReceiver) restarted(p *proc, arm bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notifier, r.armed = p, arm
}

func (r *crashReceiver) state() (begun, active int, got []crashReceipt) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.begun, r.active, slices.Clone(r.got)
}

// ledgerStates returns the state of every webhook notification of the
// comic flow in the notifier's ledger, by notification id.
func ledgerStates(ctx context.Context, t *testing.T, rdb redis.UniversalClient) map[string]notifier.DeliveryState {
	t.Helper()
	out := map[string]notifier.DeliveryState{}
	iter := rdb.Scan(ctx, 0, "*:ledger:"+notifier.DefaultLedgerName+":"+comic.Name+":*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	for chunk := range slices.Chunk(keys, 500) {
		vals, err := rdb.MGet(ctx, chunk...).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vals {
			var rec notifier.DeliveryRecord
			if s, ok := v.(string); ok && json.Unmarshal([]byte(s), &rec) == nil && rec.Channel == notifier.ChannelWebhook {
				out[rec.EventID] = rec.State
			}
		}
	}
	return out
}
