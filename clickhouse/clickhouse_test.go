package clickhouse

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestConfig_Validate(t *testing.T) {
	tests := []struct {
		name        string
		cfg         Config
		wantErr     string // substring; "" means valid
		unsupported bool   // errors.Is(err, ErrUnsupportedProtocol)
	}{
		{name: "native dsn", cfg: Config{DSN: "clickhouse://default:@127.0.0.1:9000/default"}},
		{name: "tcp dsn", cfg: Config{DSN: "tcp://127.0.0.1:9000/db"}},
		{name: "explicit values", cfg: Config{DSN: "clickhouse://127.0.0.1:9000/db", DialTimeout: time.Second, MaxOpenConns: 2}},
		{name: "empty dsn", cfg: Config{}, wantErr: "DSN is empty"},
		{name: "http dsn", cfg: Config{DSN: "http://127.0.0.1:8123/db"}, wantErr: "native protocol", unsupported: true},
		{name: "https dsn", cfg: Config{DSN: "https://127.0.0.1:8443/db?secure=true"}, wantErr: "native protocol", unsupported: true},
		{name: "unknown scheme", cfg: Config{DSN: "postgres://127.0.0.1/db"}, wantErr: "want clickhouse://"},
		{name: "unparsable dsn", cfg: Config{DSN: "clickhouse://u:p@127.0.0.1:9000/%zz"}, wantErr: "parse DSN"},
		{name: "no host", cfg: Config{DSN: "clickhouse:///db"}, wantErr: "parse DSN"},
		{name: "bad parameter", cfg: Config{DSN: "clickhouse://127.0.0.1:9000/db?dial_timeout=soon"}, wantErr: "parse DSN"},
		{name: "negative timeout", cfg: Config{DSN: "clickhouse://127.0.0.1:9000", DialTimeout: -time.Second}, wantErr: "negative"},
		{name: "negative conns", cfg: Config{DSN: "clickhouse://127.0.0.1:9000", MaxOpenConns: -1}, wantErr: "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate() = %v, want error containing %q", err, tt.wantErr)
			}
			if got := errors.Is(err, ErrUnsupportedProtocol); got != tt.unsupported {
				t.Errorf("errors.Is(err, ErrUnsupportedProtocol) = %v, want %v", got, tt.unsupported)
			}
		})
	}
}

func TestConfig_defaults(t *testing.T) {
	tests := []struct {
		name       string
		cfg        Config
		wantDial   time.Duration
		wantOpen   int
		wantIdleLE int
	}{
		{name: "zero fields", cfg: Config{DSN: "clickhouse://127.0.0.1:9000"}, wantDial: DefaultDialTimeout, wantOpen: DefaultMaxOpenConns, wantIdleLE: DefaultMaxOpenConns},
		{name: "config overrides dsn", cfg: Config{DSN: "clickhouse://127.0.0.1:9000?dial_timeout=1m&max_open_conns=50", DialTimeout: 2 * time.Second, MaxOpenConns: 3}, wantDial: 2 * time.Second, wantOpen: 3, wantIdleLE: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts, err := tt.cfg.options()
			if err != nil {
				t.Fatal(err)
			}
			if opts.DialTimeout != tt.wantDial || opts.MaxOpenConns != tt.wantOpen || opts.MaxIdleConns > tt.wantIdleLE {
				t.Fatalf("dial %v open %d idle %d; want dial %v open %d idle <= %d",
					opts.DialTimeout, opts.MaxOpenConns, opts.MaxIdleConns, tt.wantDial, tt.wantOpen, tt.wantIdleLE)
			}
		})
	}
}

func TestOpen_rejectsBadConfigWithoutDialing(t *testing.T) {
	tests := []struct {
		name string
		dsn  string
	}{
		{name: "http", dsn: "http://127.0.0.1:8123/default"},
		{name: "bad dsn", dsn: "clickhouse://%zz"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Open(context.Background(), Config{DSN: tt.dsn})
			if err == nil {
				c.Close()
				t.Fatal("Open succeeded")
			}
		})
	}
}

func TestOpen_unreachableServerErrors(t *testing.T) {
	// Port 1 on loopback: connection refused at once.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Open(ctx, Config{DSN: "clickhouse://127.0.0.1:1/default", DialTimeout: time.Second})
	if err == nil {
		c.Close()
		t.Fatal("Open succeeded against a closed port")
	}
	if !strings.Contains(err.Error(), "ping") {
		t.Errorf("error %q does not say the ping failed", err)
	}
}
