package writer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"golang.org/x/sync/singleflight"
)

// MetricProjectionListPages counts the pages ListCache served. Int64Counter,
// unit {page}, attribute cache: "hit" (served again) or "miss" (listed).
const MetricProjectionListPages = "dropstream.writer.projection.list_pages"

// maxCachedPages bounds ListCache's entries; ProjectionConfig.ListCacheBytes
// bounds their bytes.
const maxCachedPages = 4096

// ListCache serves List's pages rendered by a function, and serves a page
// again while nothing it shows can have changed: no transition was applied
// to any partition since it was listed, and none of its entities expired.
// A page served again costs one read of the partitions' versions instead of
// the index ranges and a hash per entity (BENCHMARKS.md, "The availability
// list served again while unchanged"). It is safe for concurrent use.
type ListCache struct {
	p      *Projection
	render func(items []EntityState, next string) ([]byte, error)
	pages  *lru.Cache[string, cachedPage] // nil: ListCacheBytes < 0
	flight singleflight.Group
	mu     sync.Mutex // serializes stores, to keep bytes exact
	bytes  int
}

// cachedPage is a rendered page and what it was read at.
type cachedPage struct {
	version string
	until   int64 // Unix ms when its first entity expires; 0: never
	body    []byte
}

// NewListCache returns a cache of p's pages rendered by render, bounded by
// p's ListCacheBytes.
func (p *Projection) NewListCache(render func(items []EntityState, next string) ([]byte, error)) *ListCache {
	c := &ListCache{p: p, render: render}
	if p.cfg.ListCacheBytes >= 0 {
		// The callback runs under c.mu: only stores add or evict.
		c.pages, _ = lru.NewWithEvict(maxCachedPages, func(_ string, pg cachedPage) { c.bytes -= len(pg.body) })
	}
	return c
}

// Page returns render's bytes for List(f, cursor, limit), and List's errors.
func (c *ListCache) Page(ctx context.Context, f Filter, cursor string, limit int) ([]byte, error) {
	if c.pages == nil {
		return c.list(ctx, f, cursor, limit, "", "")
	}
	version, err := c.p.version(ctx)
	if err != nil {
		return nil, fmt.Errorf("writer: list: %w", err)
	}
	key := strings.Join([]string{f.Provider, f.Venue, f.Date, strconv.Itoa(f.PartySize), f.State, cursor, strconv.Itoa(limit)}, "\x00")
	if pg, ok := c.pages.Get(key); ok && pg.version == version && (pg.until == 0 || time.Now().UnixMilli() < pg.until) {
		c.p.listPages.Add(ctx, 1, hitAttr)
		return pg.body, nil
	}
	// Requests that miss the same page at the same version share one list,
	// which a request that leaves does not cancel for the others.
	body, err, _ := c.flight.Do(key+"\x00"+version, func() (any, error) {
		return c.list(context.WithoutCancel(ctx), f, cursor, limit, key, version)
	})
	if err != nil {
		return nil, err
	}
	return body.([]byte), nil
}

var (
	hitAttr  = metric.WithAttributes(attribute.String("cache", "hit"))
	missAttr = metric.WithAttributes(attribute.String("cache", "miss"))
)

// list lists and renders a page, and keeps it under key ("": not kept) at
// version, read before the list.
func (c *ListCache) list(ctx context.Context, f Filter, cursor string, limit int, key, version string) ([]byte, error) {
	items, next, err := c.p.List(ctx, f, cursor, limit)
	if err != nil {
		return nil, err
	}
	body, err := c.render(items, next)
	if err != nil {
		return nil, err
	}
	c.p.listPages.Add(ctx, 1, missAttr)
	if key == "" || len(body) > c.p.cfg.ListCacheBytes/64 {
		return body, nil
	}
	pg := cachedPage{version: version, body: body}
	for _, e := range items {
		if at, _ := expiry(e.Date, c.p.cfg.RetainAfterDate); at > 0 && (pg.until == 0 || at < pg.until) {
			pg.until = at
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pages.Remove(key)
	c.pages.Add(key, pg)
	c.bytes += len(body)
	for c.bytes > c.p.cfg.ListCacheBytes {
		c.pages.RemoveOldest()
	}
	return body, nil
}

// version returns every partition's version as one string; it changes with
// every change a script applies to any partition.
func (p *Projection) version(ctx context.Context) (string, error) {
	vals := make([]string, len(p.versionKeys))
	if _, ok := p.rdb.(*redis.ClusterClient); ok { // MGET cannot span slots
		cmds := make([]*redis.StringCmd, len(p.versionKeys))
		_, err := p.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
			for q, k := range p.versionKeys {
				cmds[q] = pipe.Get(ctx, k)
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return "", err
		}
		for q, c := range cmds {
			vals[q] = c.Val()
		}
		return strings.Join(vals, ","), nil
	}
	got, err := p.rdb.MGet(ctx, p.versionKeys...).Result()
	if err != nil {
		return "", err
	}
	for q, v := range got {
		vals[q], _ = v.(string)
	}
	return strings.Join(vals, ","), nil
}
