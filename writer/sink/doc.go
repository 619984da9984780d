// Package sink is the batched ClickHouse append every flow's history goes
// through: a stage reads a topic, hands each batch's rows to a Batcher
// shared by its copies, and acknowledges the batch once the flush holding
// it is in ClickHouse (History). While ClickHouse does not answer, batches
// are held and the backlog waits in the stream. It imports no flow, so a
// flow (or the notifier) appending its history links no other flow.
package sink
