// Package deploy holds the deployment files (deploy/grafana,
// deploy/prometheus; compose.yaml and the Dockerfile at the top) and the
// tests that keep them true to the code: every dashboard query runs on a
// real ClickHouse, every dashboard metric is one the code exports, and
// compose.yaml's variables, mounts and build are checked without Docker.
package deploy
