// Package poll fetches feeds politely with conditional GETs, bounded
// size, time and redirects, and per-host pacing; Parse turns a body into
// bounded Items with identities and content hashes (gofeed).
package poll
