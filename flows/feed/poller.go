package feed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/dropstream/dropstream/flows/feed/poll"
	"github.com/dropstream/dropstream/stream"
)

// PollerConfig configures the polling service. Zero fields take their
// defaults.
type PollerConfig struct {
	// Fetch configures the fetcher (timeouts, size, redirects, politeness).
	Fetch poll.Config
	// Concurrency is how many feeds are fetched at once. Default 16.
	Concurrency int
	// Refresh is how often the feed list is reloaded. Default 10s.
	Refresh time.Duration
	// MaxBackoff caps the pause after consecutive failures. Default 6h.
	MaxBackoff time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// WithDefaults returns c with every zero field set to its default.
func (c PollerConfig) WithDefaults() PollerConfig {
	c.Fetch = c.Fetch.WithDefaults()
	if c.Concurrency == 0 {
		c.Concurrency = 16
	}
	if c.Refresh == 0 {
		c.Refresh = 10 * time.Second
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = 6 * time.Hour
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c PollerConfig) Validate() error {
	var errs []error
	if err := c.Fetch.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Concurrency < 1 || c.Concurrency > 1024 {
		errs = append(errs, fmt.Errorf("feed poller: concurrency %d out of range 1..1024", c.Concurrency))
	}
	if c.Refresh < 10*time.Millisecond || c.MaxBackoff < time.Second {
		errs = append(errs, fmt.Errorf("feed poller: refresh %s or max backoff %s too short", c.Refresh, c.MaxBackoff))
	}
	return errors.Join(errs...)
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

// Poller is the polling service: it fetches every feed every PollEvery
// (with jitter at start, backoff after failures) and publishes each outcome
// as a Poll on Topics.Polls. Run one per deployment.
type Poller struct {
	flow    *Flow
	fetcher *poll.Fetcher
	cfg     PollerConfig

	mu       sync.Mutex
	next     map[string]time.Time
	failures map[string]int
}

// NewPoller returns the polling service of the flow.
func (f *Flow) NewPoller(cfg PollerConfig) (*Poller, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	fetcher, err := poll.NewFetcher(cfg.Fetch)
	if err != nil {
		return nil, err
	}
	return &Poller{flow: f, fetcher: fetcher, cfg: cfg, next: map[string]time.Time{}, failures: map[string]int{}}, nil
}

// Run polls until ctx ends.
func (p *Poller) Run(ctx context.Context) error {
	sem := make(chan struct{}, p.cfg.Concurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var feeds []Feed
	var loaded time.Time
	for {
		now := p.cfg.Now()
		if now.Sub(loaded) >= p.cfg.Refresh {
			fs, err := p.flow.store.Feeds(ctx)
			if err != nil {
				p.flow.log.WarnContext(ctx, "feed poller: cannot load feeds", "error", err)
			} else {
				feeds, loaded = fs, now
			}
		}
		for _, fd := range feeds {
			if !p.due(fd, now) {
				continue
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return nil
			}
			wg.Go(func() {
				defer func() { <-sem }()
				if _, err := p.PollOnce(ctx, fd); err != nil && ctx.Err() == nil {
					p.flow.log.WarnContext(ctx, "feed poller: poll not published", "feed_id", fd.ID, "error", err)
				}
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

// PollOnce fetches fd once and publishes the outcome; a failed fetch is
// published as a Poll with OK false. It returns the published Poll.
func (p *Poller) PollOnce(ctx context.Context, fd Feed) (Poll, error) {
	f := p.flow
	var v poll.Validators
	if raw, err := f.rdb.HGet(ctx, defsKey("validators"), fd.ID).Bytes(); err == nil {
		_ = json.Unmarshal(raw, &v)
	}
	resp, err := p.fetcher.Fetch(ctx, fd.URL, v)
	out := Poll{FeedID: fd.ID, PolledAtMs: p.cfg.Now().UnixMilli()}
	if err == nil && !resp.NotModified {
		var parsed poll.Parsed
		if parsed, err = poll.Parse(resp.Body); err == nil {
			out.Items, out.MissingGUIDs, out.DuplicateGUIDs = parsed.Items, parsed.MissingGUIDs, parsed.DuplicateGUIDs
		}
	}
	var retryAfter time.Duration
	if err != nil {
		out.Error = clip(err.Error(), 512)
		var th *poll.Throttled
		if errors.As(err, &th) {
			retryAfter = th.RetryAfter
		}
	} else {
		out.OK, out.NotModified = true, resp.NotModified
	}
	p.schedule(fd, out.OK, retryAfter)
	body, _ := json.Marshal(out)
	if err := f.pub.Publish(ctx, f.topics.Polls, stream.NewMessage(fd.ID, TypePoll, body)); err != nil {
		// The poll is lost; the next one fetches the feed again in full,
		// since the validators of this answer were not kept.
		return out, err
	}
	// Only once the items are on their way: with the validators kept
	// first, a lost poll would turn the next fetch into a 304 and its
	// items would never be observed.
	if v := resp.Validators; out.OK && v != (poll.Validators{}) {
		vb, _ := json.Marshal(v)
		if err := f.rdb.HSet(ctx, defsKey("validators"), fd.ID, vb).Err(); err != nil {
			f.log.WarnContext(ctx, "feed poller: validators not kept; the next fetch is unconditional", "feed_id", fd.ID, "error", err)
		}
	}
	st := PollStatus{PolledAt: out.PolledAt().UTC(), OK: out.OK, NotModified: out.NotModified, Error: out.Error,
		Items: len(out.Items), MissingGUIDs: out.MissingGUIDs, Duplicates: out.DuplicateGUIDs}
	p.mu.Lock()
	st.Failures = p.failures[fd.ID]
	p.mu.Unlock()
	sb, _ := json.Marshal(st)
	_ = f.rdb.HSet(ctx, defsKey("status"), fd.ID, sb).Err()
	return out, nil
}

// schedule books the next poll: one period on success; after k
// consecutive failures 2^k periods (capped at MaxBackoff), and at least
// the server's Retry-After.
func (p *Poller) schedule(fd Feed, ok bool, retryAfter time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := fd.Poll()
	if ok {
		delete(p.failures, fd.ID)
	} else {
		p.failures[fd.ID]++
		for i := 0; i < p.failures[fd.ID] && d < p.cfg.MaxBackoff; i++ {
			d *= 2
		}
		d = max(min(d, p.cfg.MaxBackoff), retryAfter)
	}
	p.next[fd.ID] = p.cfg.Now().Add(d)
}

// Status returns the latest poll status of a feed, if any.
func (s *Store) Status(ctx context.Context, id string) (PollStatus, bool) {
	raw, err := s.rdb.HGet(ctx, defsKey("status"), id).Bytes()
	if err != nil {
		return PollStatus{}, false
	}
	var st PollStatus
	return st, json.Unmarshal(raw, &st) == nil
}
