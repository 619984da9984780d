// Package client is a Go client of the dropstream API, generated from the
// OpenAPI document the server answers at /openapi.json. Regenerate it with
// `go generate ./client` after a route changes.
package client

//go:generate go run ../cmd/dropstream openapi -redis-url= -clickhouse-dsn= -o openapi.json
//go:generate go tool oapi-codegen -config oapi-codegen.yaml -o client.gen.go openapi.json
