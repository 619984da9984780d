// Package collector is the head of the availability pipeline. Source and
// Store say what to poll (shared in the Redis hash "ds:sources"). Collector
// polls every (source, scope) each jittered Interval, with per-host rate
// limits, backoff, Retry-After, timeouts, a pause of sources whose
// credentials expired, and health per source; each poll is an avail.RawRun
// with a unique run id, and a failed fetch is a failed run, never an empty
// snapshot. NewNormalizer turns raw runs into avail.Snapshot messages
// through the adapters of collector/provider.
package collector
