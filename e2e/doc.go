// Package e2e holds the end-to-end tests of the availability pipeline:
// simulator → collector → normalizer → diff → projection, notifier and
// ClickHouse analytics, against a real redis-server and clickhouse-server
// (scripts/testenv.sh provides them).
//
//   - TestAvailability_simulatorToWebhook runs every stage in process and
//     checks, round after round, the projection, the webhook deliveries and
//     the ClickHouse counts against expectations computed from the
//     simulator's truth alone.
//   - TestAvailability_killStagesAndRestartRedis runs the stages as
//     dropstream processes, kills the diff and writer process with work in
//     hand, kills redis-server with work in hand (AOF, fsync always), and
//     checks that nothing was lost and nothing delivered twice.
//   - TestNotifier_KilledMidBatchResendsOnlyWhatWasInFlight streams 4,000
//     comic notifications to webhooks in the test, kills the notifier's
//     process mid-batch twice and restarts it, and checks that nothing is
//     missing, only sends in flight at a kill come twice (with the same
//     webhook-id), and the history equals the ledger.
//   - TestProjection_sessionsAfterRedelivery applies one entity's flips to
//     the projection in the orders such a kill produces.
//   - TestCheckout_LinearizableToxiproxyAndKills drives the checkout
//     contract with concurrent recording clients while Toxiproxy breaks
//     the links to Redis and processes and Redis are killed, and checks
//     the history for linearizability (flows/checkout/checkouttest);
//     TestCheckout_LinearizableFaultMatrix runs each fault alone
//     (DROPSTREAM_FULL_MATRIX=1, make faults).
//
// The package has no non-test code besides this comment.
package e2e
