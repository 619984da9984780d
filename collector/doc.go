// Package collector is the head of the availability pipeline: it keeps the
// sources to poll, polls every (source, scope) politely, and normalizes what
// it fetched.
//
//   - Source and Store: what to poll (provider, base URL, scopes, interval,
//     options), validated strictly and shared through the Redis hash
//     "ds:sources" so the API and the scheduler see the same sources.
//   - Collector: schedules a poll of every (source, scope) every Interval
//     with jitter, under a token-bucket rate limit per provider host, with
//     backoff on failures and on 429 (honouring Retry-After), a timeout per
//     request, a pause of sources whose credentials expired (401/403) until
//     their configuration changes, and health per source. Each poll is a run
//     with a unique run id, published as an avail.RawRun to the raw topic: a
//     failed fetch is a failed run, never an empty snapshot.
//   - NewNormalizer: the "avail-normalizer" stage turning raw runs into
//     avail.Snapshot messages of canonical entity keys through the provider
//     adapters of collector/provider.
//
// collector/simulator is a built-in provider for tests and the demo.
package collector
