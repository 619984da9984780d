// Package clickhouse connects dropstream to ClickHouse over the native
// protocol (clickhouse-go v2).
//
// It works with clickhouse-server 18.16 and current releases: every INSERT
// names its columns, and only clickhouse:// (or tcp://) DSNs are accepted.
// Migrate applies the embedded schema/NNNN_name.sql files. Counts are exact
// before merges (uniqExact, argMax).
package clickhouse

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Defaults applied by Open to zero fields of Config.
const (
	DefaultDialTimeout  = 5 * time.Second
	DefaultMaxOpenConns = 10
)

// ErrUnsupportedProtocol is returned (wrapped) for DSNs that do not use the
// native protocol, such as http:// and https://.
var ErrUnsupportedProtocol = errors.New("clickhouse: only the native protocol is supported (clickhouse://host:9000/db); HTTP fails with ClickHouse 18.16")

// Config configures a Client. Zero fields take the documented defaults.
type Config struct {
	// DSN is the native-protocol address, e.g.
	// "clickhouse://user:pass@127.0.0.1:9000/db". Required; http(s):// is
	// ErrUnsupportedProtocol.
	DSN string
	// DialTimeout bounds establishing one connection. Default 5s. It
	// overrides a dial_timeout parameter of the DSN.
	DialTimeout time.Duration
	// MaxOpenConns caps the connections kept to the server. Default 10. It
	// overrides a max_open_conns parameter of the DSN.
	MaxOpenConns int
}

// SettingInsertDistributedSync is set to 1 unless the DSN sets it: an
// insert through a Distributed table returns once every shard has its rows.
const SettingInsertDistributedSync = "insert_distributed_sync"

// Validate reports whether Open can use cfg: a native-protocol DSN and no
// negative duration or count.
func (c Config) Validate() error {
	_, err := c.options()
	return err
}

// options validates c and returns the clickhouse-go options for it, with the
// defaults applied.
func (c Config) options() (*ch.Options, error) {
	if c.DSN == "" {
		return nil, errors.New("clickhouse: Config.DSN is empty")
	}
	if c.DialTimeout < 0 {
		return nil, fmt.Errorf("clickhouse: Config.DialTimeout %v is negative", c.DialTimeout)
	}
	if c.MaxOpenConns < 0 {
		return nil, fmt.Errorf("clickhouse: Config.MaxOpenConns %d is negative", c.MaxOpenConns)
	}
	u, err := url.Parse(c.DSN)
	if err != nil {
		// url.Error quotes the DSN, password included: report only the cause.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, fmt.Errorf("clickhouse: parse DSN: %w", err)
	}
	switch u.Scheme {
	case "clickhouse", "tcp":
	case "http", "https":
		return nil, fmt.Errorf("clickhouse: DSN scheme %q: %w", u.Scheme, ErrUnsupportedProtocol)
	default:
		return nil, fmt.Errorf("clickhouse: DSN scheme %q: want clickhouse://", u.Scheme)
	}
	opts, err := ch.ParseDSN(c.DSN)
	if err != nil {
		return nil, fmt.Errorf("clickhouse: parse DSN: %w", err)
	}
	if opts.Protocol != ch.Native {
		return nil, fmt.Errorf("clickhouse: DSN protocol %s: %w", opts.Protocol, ErrUnsupportedProtocol)
	}
	if opts.Settings == nil {
		opts.Settings = ch.Settings{}
	}
	if _, ok := opts.Settings[SettingInsertDistributedSync]; !ok {
		opts.Settings[SettingInsertDistributedSync] = 1 // settings must be int or bool on 18.16
	}
	opts.DialTimeout = c.DialTimeout
	opts.DialTimeout = cmp.Or(opts.DialTimeout, DefaultDialTimeout)
	opts.MaxOpenConns = c.MaxOpenConns
	opts.MaxOpenConns = cmp.Or(opts.MaxOpenConns, DefaultMaxOpenConns)
	if opts.MaxIdleConns <= 0 || opts.MaxIdleConns > opts.MaxOpenConns {
		opts.MaxIdleConns = min(5, opts.MaxOpenConns)
	}
	return opts, nil
}

// Client is a pool of native-protocol connections to one ClickHouse server.
// It is safe for concurrent use.
type Client struct {
	conn driver.Conn
	dsn  string // reaches the other servers of a cluster (credentials, database)
}

// Open validates cfg, connects, and pings the server once; it returns an error
// (wrapping the cause) if any step fails, and then holds no connection.
func Open(ctx context.Context, cfg Config) (*Client, error) {
	opts, err := cfg.options()
	if err != nil {
		return nil, err
	}
	conn, err := ch.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("clickhouse: open %v: %w", opts.Addr, err)
	}
	c := &Client{conn: conn, dsn: cfg.DSN}
	if err := c.Ping(ctx); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return c, nil
}

// Ping checks that the server answers.
func (c *Client) Ping(ctx context.Context) error {
	if err := c.conn.Ping(ctx); err != nil {
		return fmt.Errorf("clickhouse: ping: %w", err)
	}
	return nil
}

// Conn returns the underlying clickhouse-go connection pool for queries and
// batches. It is owned by the Client: do not close it, call Client.Close.
func (c *Client) Conn() driver.Conn { return c.conn }

// Close closes every connection. The Client must not be used afterwards.
func (c *Client) Close() error {
	if err := c.conn.Close(); err != nil {
		return fmt.Errorf("clickhouse: close: %w", err)
	}
	return nil
}
