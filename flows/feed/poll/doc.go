// Package poll fetches and parses RSS and Atom feeds politely.
//
// A Fetcher sends one conditional GET per call (If-None-Match and
// If-Modified-Since from the validators of the previous answer), accepts
// gzip, bounds the body (Config.MaxBodyBytes, counted after decompression),
// the time (Config.Timeout) and the redirects (Config.MaxRedirects), and
// keeps per-host politeness: a token-bucket rate limit and a pause when a
// server answers 429 or 503 with Retry-After. Parse turns a body into Items
// with github.com/mmcdole/gofeed (RSS 0.9x, 1.0, 2.0 and Atom), bounding
// every field, giving every item an identity (its guid, or one synthesized
// from link and title) and a content hash of the fields a reader sees.
//
// The token bucket and the Retry-After parser are package
// internal/ratelimit's, shared with the collector's availability sources.
package poll
