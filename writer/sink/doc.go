// Package sink is the batched ClickHouse append of every flow's history:
// a stage hands each batch's rows to a Batcher and acknowledges it once
// written; while ClickHouse is down the backlog waits in the stream.
package sink
