package feed

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/dropstream/dropstream/flows/feed/poll"
	"github.com/dropstream/dropstream/internal/egress"
	"github.com/dropstream/dropstream/internal/pollgate"
	"github.com/dropstream/dropstream/internal/recordstore"
	"github.com/dropstream/dropstream/internal/settings"
	"github.com/dropstream/dropstream/internal/tick"
	"github.com/dropstream/dropstream/stream"
)

// gateMargin is added to the fetch timeout to hold a feed's gate while
// polling: time for the parse and the publication.
const gateMargin = 10 * time.Second

// PollerConfig configures the polling service. Zero fields take defaults.
type PollerConfig struct {
	// Fetch configures the fetcher (timeouts, size, redirects, politeness).
	Fetch poll.Config
	// Concurrency is how many feeds are fetched at once. Default 16.
	Concurrency int `default:"16" range:"1..1024"`
	// Refresh is how often the feed list is reloaded. Default 10s.
	Refresh time.Duration `default:"10s" range:"10ms.."`
	// MaxBackoff caps the pause after consecutive failures. Default 6h.
	MaxBackoff time.Duration `default:"6h" range:"1s.."`
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Owner names this copy in the poll gates. Default stream.DefaultConsumerName().
	Owner string
}

// WithDefaults returns c with every zero field set to its default.
func (c PollerConfig) WithDefaults() PollerConfig {
	c.Fetch = c.Fetch.WithDefaults()
	settings.Defaults(&c)
	c.Now = tick.Or(c.Now)
	c.Owner = cmp.Or(c.Owner, stream.DefaultConsumerName())
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c PollerConfig) Validate() error {
	return errors.Join(c.Fetch.Validate(), settings.Check("feed poller", &c))
}

// PollStatus is the outcome of a feed's latest poll.
type PollStatus struct {
	PolledAt     time.Time `json:"polled_at"`
	OK           bool      `json:"ok"`
	NotModified  bool      `json:"not_modified,omitempty"`
	Error        string    `json:"error,omitempty"`
	Items        int       `json:"items"`
	Failures     int       `json:"consecutive_failures,omitempty"`
	MissingGUIDs int       `json:"missing_guids,omitempty"`
	Duplicates   int       `json:"duplicate_guids,omitempty"`
}

// Poller fetches every feed when due and publishes each outcome as a Poll.
// Copies share feeds through pollgate and failure counts through Redis.
type Poller struct {
	flow    *Flow
	fetcher *poll.Fetcher
	gate    *pollgate.Gate
	cfg     PollerConfig

	mu   sync.Mutex
	next map[string]time.Time
}

// NewPoller returns the flow's polling service; fetches go through the
// flow's egress policy unless cfg.Fetch sets one.
func (f *Flow) NewPoller(cfg PollerConfig) (*Poller, error) {
	cfg.Fetch.Egress = cmp.Or(cfg.Fetch.Egress, f.cfg.Egress)
	if cfg.Fetch.HostGate == nil {
		pacer, err := pollgate.NewPacer(f.rdb, pollgate.PacerConfig{Name: Name, Spacing: f.cfg.Etiquette.HostSpacing})
		if err != nil {
			return nil, fmt.Errorf("feed poller: %w", err)
		}
		cfg.Fetch.HostGate = pacer
	}
	if cfg.Fetch.Now == nil {
		cfg.Fetch.Now = cfg.Now
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	fetcher, err := poll.NewFetcher(cfg.Fetch)
	if err != nil {
		return nil, err
	}
	gate, err := pollgate.New(f.rdb, pollgate.Config{Owner: cfg.Owner})
	if err != nil {
		return nil, fmt.Errorf("feed poller: %w", err)
	}
	return &Poller{flow: f, fetcher: fetcher, gate: gate, cfg: cfg, next: map[string]time.Time{}}, nil
}

// Run polls until ctx ends.
func (p *Poller) Run(ctx context.Context) error {
	sem := make(chan struct{}, p.cfg.Concurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var feeds []Feed
	var halted []string
	var loaded time.Time
	for {
		now := p.cfg.Now()
		if now.Sub(loaded) >= p.cfg.Refresh {
			fs, err := p.flow.store.Feeds(ctx)
			if err == nil {
				halted, err = p.flow.rdb.HKeys(ctx, defsKey("halted")).Result()
			}
			if err != nil {
				p.flow.log.WarnContext(ctx, "feed poller: cannot load feeds", "error", err)
			} else {
				feeds, loaded = fs, now
			}
			if _, err := p.RenewWebSub(ctx); err != nil && ctx.Err() == nil {
				p.flow.log.WarnContext(ctx, "feed poller: websub lease not renewed; trying again later", "error", err)
			}
		}
		for _, fd := range feeds {
			if slices.Contains(halted, fd.ID) || !p.due(fd, now) {
				continue
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return nil
			}
			wg.Go(func() {
				defer func() { <-sem }()
				p.pollShared(ctx, fd)
			})
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// due reports whether fd should be polled at now, and books its next poll.
func (p *Poller) due(fd Feed, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	next, ok := p.next[fd.ID]
	if !ok {
		// First sight: spread the feeds over one period.
		next = now.Add(time.Duration(rand.Int64N(int64(fd.Poll()/4) + 1)))
		p.next[fd.ID] = next
	}
	if now.Before(next) {
		return false
	}
	p.next[fd.ID] = now.Add(fd.Poll()) // a placeholder while polling
	return true
}

// pollShared polls fd if this copy takes its gate, holds the gate until the
// next poll, and books the next look for when the gate opens.
func (p *Poller) pollShared(ctx context.Context, fd Feed) {
	key := p.flow.topics.feedPrefix(fd.ID) + "poll"
	ok, wait, err := p.gate.Take(ctx, key, p.cfg.Fetch.Timeout+gateMargin)
	switch {
	case err != nil:
		p.flow.log.WarnContext(ctx, "feed poller: poll gate unavailable; trying again later", "feed_id", fd.ID, "error", err)
		p.book(fd.ID, fd.Poll())
		return
	case !ok:
		// Another copy polls it: look again when its gate opens, at most a
		// period on (an in-flight poll holds it only for the fetch timeout).
		p.book(fd.ID, min(wait, fd.Poll()))
		return
	}
	_, d, err := p.poll(ctx, fd)
	if errors.Is(err, ErrHalted) {
		_ = p.gate.Open(context.WithoutCancel(ctx), key)
		p.book(fd.ID, p.cfg.MaxBackoff)
		return
	}
	if err != nil && ctx.Err() == nil {
		p.flow.log.WarnContext(ctx, "feed poller: poll not published", "feed_id", fd.ID, "error", err)
	}
	if ctx.Err() != nil {
		_ = p.gate.Open(context.WithoutCancel(ctx), key) // let another copy poll it now
		return
	}
	next, err := p.gate.Hold(ctx, key, d)
	if err != nil {
		p.flow.log.WarnContext(ctx, "feed poller: poll gate not held; another copy may poll early", "feed_id", fd.ID, "error", err)
	}
	p.book(fd.ID, next)
}

// book sets when this copy looks at feed id again.
func (p *Poller) book(id string, after time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next[id] = p.cfg.Now().Add(after)
}

// PollOnce fetches fd once, whatever its gate, and publishes and returns
// the Poll (OK false on a failed fetch).
func (p *Poller) PollOnce(ctx context.Context, fd Feed) (Poll, error) {
	out, d, err := p.poll(ctx, fd)
	p.book(fd.ID, d)
	return out, err
}

// poll fetches fd once (ErrHalted when halted), publishes the outcome and
// returns it with the delay to the next poll.
func (p *Poller) poll(ctx context.Context, fd Feed) (Poll, time.Duration, error) {
	f := p.flow
	if halted, err := f.rdb.HExists(ctx, defsKey("halted"), fd.ID).Result(); err != nil || halted {
		return Poll{}, p.cfg.MaxBackoff, cmp.Or(err, ErrHalted)
	}
	v, _ := recordstore.InHash[poll.Validators](f.rdb, defsKey("validators")).Get(ctx, fd.ID)
	resp, err := p.fetcher.Fetch(ctx, fd.URL, v)
	now := p.cfg.Now()
	p.recordFetch(ctx, fd.ID, resp, err)
	out := Poll{FeedID: fd.ID, PolledAtMs: now.UnixMilli()}
	var doc *poll.Hints
	if err == nil && !resp.NotModified {
		var parsed poll.Parsed
		if parsed, err = poll.Parse(resp.Body); err == nil {
			out.Items, out.MissingGUIDs, out.DuplicateGUIDs = parsed.Items, parsed.MissingGUIDs, parsed.DuplicateGUIDs
			h := poll.DocumentHints(resp.Body)
			doc = &h
		}
	}
	var retryAfter time.Duration
	if err != nil {
		// The class and the status, never the server's answer.
		out.Error = clip(egress.Describe(err), 512)
		var th *poll.Throttled
		if errors.As(err, &th) {
			retryAfter = th.RetryAfter
		}
	} else {
		out.OK, out.NotModified = true, resp.NotModified
	}
	failures := p.countFailures(ctx, fd.ID, out.OK)
	hints := resp.Hints.Merge(p.docHints(ctx, fd.ID, doc))
	if out.OK && resp.MovedTo != "" {
		p.follow(ctx, &fd, resp.MovedTo)
	}
	if out.OK {
		if err := f.ensureWebSub(ctx, fd, hints, now); err != nil {
			f.log.WarnContext(ctx, "feed poller: websub subscription not asked; polling on", "feed_id", fd.ID, "error", err)
		}
	}
	s := schedule{every: fd.Poll(), hints: hints, arrivals: p.arrivals(ctx, fd.ID), now: now, failures: failures,
		retryAfter: retryAfter, maxBackoff: p.cfg.MaxBackoff}
	if w, ok, _ := f.webSub(ctx, fd.ID); ok && w.pushed(now) {
		s.fallback = f.cfg.WebSub.Fallback
	}
	d, reason := f.cfg.Etiquette.next(s)
	body, _ := json.Marshal(out)
	if err := f.pub.Publish(ctx, f.topics.Polls, stream.NewMessage(fd.ID, TypePoll, body)); err != nil {
		// Lost; the validators were not kept, so the next fetch is in full.
		return out, d, err
	}
	// Only now: validators kept before a lost poll would make the next
	// fetch a 304 and lose its items.
	if v := resp.Validators; out.OK && v != (poll.Validators{}) {
		if err := recordstore.InHash[poll.Validators](f.rdb, defsKey("validators")).Put(ctx, fd.ID, v); err != nil {
			f.log.WarnContext(ctx, "feed poller: validators not kept; the next fetch is unconditional", "feed_id", fd.ID, "error", err)
		}
	}
	st := PollStatus{PolledAt: out.PolledAt().UTC(), OK: out.OK, NotModified: out.NotModified, Error: out.Error,
		Items: len(out.Items), MissingGUIDs: out.MissingGUIDs, Duplicates: out.DuplicateGUIDs, Failures: failures}
	_ = recordstore.InHash[PollStatus](f.rdb, defsKey("status")).Put(ctx, fd.ID, st)
	var halt error
	switch {
	case errors.Is(err, poll.ErrGone):
		halt = f.halt(ctx, fd, FeedGone, "HTTP 410", now)
	case failures >= f.cfg.Etiquette.DeadAfter:
		halt = f.halt(ctx, fd, FeedDead, strconv.Itoa(failures)+" failed polls in a row, the last: "+out.Error, now)
	}
	if halt != nil {
		f.log.WarnContext(ctx, "feed poller: halted feed's subscribers not told yet", "feed_id", fd.ID, "error", halt)
	}
	p.recordSchedule(ctx, fd.ID, now, d, reason)
	return out, d, nil
}

// follow moves a feed (same id) to a permanent redirect's URL if the flow
// may fetch it.
func (p *Poller) follow(ctx context.Context, fd *Feed, moved string) {
	moved = NormalizeURL(moved)
	if moved == fd.URL || p.flow.cfg.Egress.CheckURL(moved) != nil {
		return
	}
	next, err := p.flow.store.feeds.Update(ctx, fd.ID, func(x *Feed) error {
		if x.URL != fd.URL {
			return nil // moved meanwhile
		}
		x.URL = moved
		return x.Validate()
	})
	if err != nil {
		p.flow.log.WarnContext(ctx, "feed poller: moved feed's URL not updated", "feed_id", fd.ID, "error", err)
		return
	}
	p.flow.moved.Add(ctx, 1)
	*fd = next
}

// countFailures updates and returns the feed's shared consecutive-failure
// count; when Redis cannot tell, a failure counts as the first.
func (p *Poller) countFailures(ctx context.Context, id string, ok bool) int {
	if ok {
		_ = p.flow.rdb.HDel(ctx, defsKey("failures"), id).Err()
		return 0
	}
	n, err := p.flow.rdb.HIncrBy(ctx, defsKey("failures"), id, 1).Result()
	if err != nil {
		return 1
	}
	return int(n)
}

// Status returns the latest poll status of a feed, if any.
func (s *Store) Status(ctx context.Context, id string) (PollStatus, bool) {
	st, err := recordstore.InHash[PollStatus](s.rdb, defsKey("status")).Get(ctx, id)
	return st, err == nil
}
