package clickhouse

import (
	"context"
	"fmt"
)

// ServerVersion returns the server's version string, e.g. "18.16.1".
func (c *Client) ServerVersion(ctx context.Context) (string, error) {
	var v string
	if err := c.conn.QueryRow(ctx, "SELECT version()").Scan(&v); err != nil {
		return "", fmt.Errorf("clickhouse: server version: %w", err)
	}
	return v, nil
}
