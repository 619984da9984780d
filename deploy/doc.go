// Package deploy holds the deployment files of dropstream and the tests that
// keep them true to the code: deploy/grafana (datasources and dashboards
// provisioned into Grafana), deploy/prometheus (the scrape configuration),
// and, at the top of the repository, compose.yaml and the Dockerfile.
//
// The tests run every ClickHouse query of every dashboard against a real
// ClickHouse with Grafana's macros replaced by values, check that every
// Prometheus metric a dashboard uses is one the code exports, and check
// compose.yaml statically (Docker is not needed): the variables it sets are
// read by dropstream, the files it mounts exist, and the Dockerfile builds
// the binary's package.
package deploy
