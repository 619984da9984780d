package availbench

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/dropstream/dropstream/flows/avail/watch"
	"github.com/dropstream/dropstream/internal/benchstat"
)

// receiver is the benches' webhook endpoint: it records each notice's
// latency once per watcher and event, under the key latency returns.
type receiver struct {
	now     func() time.Time
	latency func(ev watch.OpenEvent, now time.Time) (key string, d time.Duration, ok bool)

	mu   sync.Mutex
	seen map[string]bool
	lat  map[string][]time.Duration
	dups int
}

func newReceiver(now func() time.Time, latency func(watch.OpenEvent, time.Time) (string, time.Duration, bool)) *receiver {
	return &receiver{now: now, latency: latency, seen: map[string]bool{}, lat: map[string][]time.Duration{}}
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	now := r.now()
	var ev watch.OpenEvent
	if err := json.NewDecoder(req.Body).Decode(&ev); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusNoContent)
	key, d, ok := r.latency(ev, now)
	if !ok {
		return
	}
	id := ev.WatcherID + "/" + ev.EventID
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen[id] {
		r.dups++
		return
	}
	r.seen[id] = true
	r.lat[key] = append(r.lat[key], d)
}

// count returns the notices recorded under key.
func (r *receiver) count(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.lat[key])
}

// summary returns the notices under keys, the duplicates of all keys and
// the latencies.
func (r *receiver) summary(keys ...string) (n, dups int, lat benchstat.Latencies) {
	r.mu.Lock()
	var ds []time.Duration
	for _, k := range keys {
		ds = append(ds, r.lat[k]...)
	}
	dups = r.dups
	r.mu.Unlock()
	return len(ds), dups, benchstat.Summarize(ds)
}
