// Package writer reads the transition and run streams as three groups:
// "avail-projection" (Projection) keeps each entity's state, sessions and
// indexes in Redis; "avail-analytics-transitions" and
// "avail-analytics-runs" (Analytics) append to ClickHouse in batches, so a
// ClickHouse outage stalls only them.
//
// Redis keys of partition p carry the tag {avail.p}; times are Unix ms:
//
//	ds:{avail.p}:entity:<entity key>    hash: state, first_seen_at, opened_at, closed_at,
//	                                    last_seen_at, last_run[_at], last_event, session_id,
//	                                    open_run, attributes, trace_id, stable_*
//	ds:{avail.p}:sessions:<entity key>  sorted set: the newest raw flips by run time
//	ds:{avail.p}:entities:all|open|closed  sorted sets, score 0, read by ZRANGEBYLEX
//	ds:{avail.p}:entities:version       string: a µs clock moved by every change the
//	                                    scripts apply; ListCache compares it
//
// Dated entities expire RetainAfterDate after their date. List merges the
// partitions' ranges in key order. ClickHouse rows carry deterministic ids
// in ReplacingMergeTree tables, so redelivered batches collapse.
package writer
