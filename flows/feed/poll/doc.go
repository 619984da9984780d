// Package poll fetches and parses RSS and Atom feeds politely.
//
// A Fetcher sends one conditional GET per call, accepts gzip, bounds the
// body, time and redirects (Config), and keeps per-host politeness: a token
// bucket and Retry-After pauses (package internal/ratelimit). Parse turns a
// body into Items with github.com/mmcdole/gofeed, bounding every field and
// giving every item an identity and a content hash.
package poll
