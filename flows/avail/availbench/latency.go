package availbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/dropstream/dropstream/diff"
	"github.com/dropstream/dropstream/flows/avail/watch"
	"github.com/dropstream/dropstream/internal/benchstat"
	"github.com/dropstream/dropstream/internal/egress"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer"
)

// drainTimeout bounds the wait for the last notifications after the
// latency run stops publishing.
const drainTimeout = time.Minute

// Latency runs the stages after the collector with a webhook watcher per
// venue, publishes at cfg.Rate observations per second for
// cfg.LatencyDuration and records receive time − run_at. Setup and a Diff
// run must come first.
func (b *Harness) Latency(ctx context.Context) (Latency, error) {
	from := time.Now()
	recv := newReceiver(time.Now, func(ev watch.OpenEvent, now time.Time) (string, time.Duration, bool) {
		return "", now.Sub(ev.RunAt), !ev.RunAt.Before(from) // earlier ones are not of this run
	})
	srv := httptest.NewServer(recv)
	defer srv.Close()
	store, stages, closeStages, err := b.pipeline(srv.Listener.Addr().String())
	if err != nil {
		return Latency{}, err
	}
	defer closeStages()
	stop, err := b.run(ctx, 1, stages...)
	if err != nil {
		return Latency{}, err
	}
	defer stop()
	if err := b.drain(ctx, "latency: projection and notifier catching up", b.topics.Transitions,
		writer.StageProjection, watch.StageNotifier); err != nil {
		return Latency{}, err
	}
	if err := b.createWatchers(ctx, store, srv.URL+"/hook"); err != nil {
		return Latency{}, err
	}

	res := Latency{Rate: b.cfg.Rate}
	perSecond := float64(b.cfg.Rate) / float64(b.cfg.PerScope)
	total := max(1, int(perSecond*b.cfg.LatencyDuration.Seconds()))
	b.cfg.Phases.Printf("latency: publishing %d snapshots at %.0f/s (%d observations/s) for %s", total, perSecond,
		b.cfg.Rate, b.cfg.LatencyDuration)
	start := time.Now()
	if err := benchstat.Pace(ctx, time.Millisecond, perSecond, total, b.cfg.Phases.Start("latency: publishing", int64(total)), func(_, n int) error {
		for range n {
			s := b.nextScope()
			res.Expected += b.fleet.opensNext(s)
			m, err := message(b.fleet.next(s, time.Now()))
			if err != nil {
				return err
			}
			if err := b.pub.Publish(ctx, b.topics.Snapshots, m); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return res, err
	}
	res.Elapsed = time.Since(start)
	wait, cancel := context.WithTimeout(ctx, drainTimeout)
	defer cancel()
	if err := b.await(wait, "latency: notifications", pollEvery, int64(res.Expected), func() (int64, error) {
		return int64(recv.count("")), nil
	}); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return res, err
	}
	res.Received, res.Duplicates, res.Latencies = recv.summary("")
	return res, nil
}

// pipeline returns the watcher store and the stages after the collector,
// with webhooks allowed only to receiver, and a release function.
func (b *Harness) pipeline(receiver string) (*watch.Store, []stream.Stage, func(), error) {
	store, err := watch.NewStore(b.rdb, watch.StoreConfig{MaxWatchers: max(watch.DefaultMaxWatchers, b.cfg.Scopes), Logger: b.log})
	if err != nil {
		return nil, nil, nil, err
	}
	policy, err := egress.New(egress.Config{Allow: []string{receiver}})
	if err != nil {
		return nil, nil, nil, err
	}
	channels, err := notifier.NewChannels(notifier.WebhookConfig{Egress: policy}, b.log)
	if err != nil {
		return nil, nil, nil, err
	}
	notify, err := watch.NewStage(b.rdb, b.topics, store, channels,
		watch.Config{Runner: stream.RunnerConfig{Block: stageBlock}}, b.cfg.Telemetry)
	if err != nil {
		return nil, nil, nil, err
	}
	proj, err := writer.NewProjection(b.rdb, writer.ProjectionConfig{Partitions: b.cfg.Partitions,
		Runner: stream.RunnerConfig{Block: stageBlock}}, b.cfg.Telemetry)
	if err != nil {
		return nil, nil, nil, err
	}
	d := diff.NewStage(b.rdb, b.topics, b.cfg.Telemetry)
	d.Config.Block, d.Config.BatchSize = stageBlock, b.cfg.DiffBatch
	stages := []stream.Stage{d, proj.Stage(), notify}
	release := func() {}
	if b.ch != nil {
		a, err := writer.NewAnalytics(b.ch, writer.AnalyticsConfig{Partitions: b.cfg.Partitions,
			Runner: stream.RunnerConfig{Block: stageBlock}}, b.cfg.Telemetry)
		if err != nil {
			return nil, nil, nil, err
		}
		stages = append(stages, a.Stages()...)
		release = func() { _ = a.Close() }
	}
	return store, stages, release, nil
}

// createWatchers creates a venue watcher for every scope, 16 at a time.
func (b *Harness) createWatchers(ctx context.Context, store *watch.Store, hook string) error {
	start := time.Now()
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for s := range b.cfg.Scopes {
		g.Go(func() error {
			_, err := store.Create(ctx, watch.Watcher{Name: "bench " + venue(s), Provider: benchProvider,
				Venue: venue(s), Channel: notifier.ChannelWebhook, WebhookURL: hook})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("availbench: create watchers: %w", err)
	}
	b.cfg.Phases.Printf("latency: %d webhook watchers created in %s", b.cfg.Scopes, time.Since(start).Round(time.Millisecond))
	return nil
}

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
