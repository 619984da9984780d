package availbench

import (
	"encoding/json"
	"net/http"
	"slices"
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
// the latency quantiles.
func (r *receiver) summary(keys ...string) (n, dups int, p50, p99, maxLat time.Duration) {
	r.mu.Lock()
	var lat []time.Duration
	for _, k := range keys {
		lat = append(lat, r.lat[k]...)
	}
	dups = r.dups
	r.mu.Unlock()
	if len(lat) == 0 {
		return 0, dups, 0, 0, 0
	}
	slices.Sort(lat)
	return len(lat), dups, benchstat.Quantile(lat, 0.50), benchstat.Quantile(lat, 0.99), lat[len(lat)-1]
}
