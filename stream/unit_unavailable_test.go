package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestIsUnavailable_connectionErrorsOnly(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"dial refused", dial, true},
		{"wrapped dial", fmt.Errorf("find thing: %w", dial), true},
		{"eof", io.EOF, true},
		{"pool timeout", redis.ErrPoolTimeout, true},
		{"closed client", redis.ErrClosed, true},
		{"loading", errors.New("LOADING Redis is loading the dataset in memory"), true},
		{"failover", fmt.Errorf("x: %w", errors.New("READONLY You can't write against a read only replica.")), true},
		{"closed connection", fmt.Errorf("x: %w", net.ErrClosed), true},
		{"stray data on a pooled connection", errors.New("redis: connection pool: unexpected read from socket"), true},
		{"cluster down", fmt.Errorf("x: %w", errors.New("CLUSTERDOWN The cluster is down")), true},
		{"refused as text", errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), true},
		{"nil", nil, false},
		{"missing key", redis.Nil, false},
		{"wrong type", errors.New("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
		{"script error", errors.New("ERR user_script:1: Script attempted to access nonexistent global variable"), false},
		{"domain error", errors.New("order not found"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsUnavailable(tc.err); got != tc.want {
				t.Errorf("IsUnavailable(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

func TestRetryUnavailable_triesAgainOnlyWhileRedisIsUnavailable(t *testing.T) {
	refused := fmt.Errorf("find thing: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})
	domain := errors.New("order not found")
	for _, tc := range []struct {
		name      string
		budget    time.Duration
		errs      []error // the errors of the first calls; later calls succeed
		wantCalls int
		wantErr   error
	}{
		{"succeeds at once", time.Minute, nil, 1, nil},
		{"back after two refusals", time.Minute, []error{refused, refused}, 3, nil},
		{"loading, then failover, then back", time.Minute,
			[]error{errors.New("LOADING Redis is loading the dataset in memory"), errors.New("READONLY You can't write against a read only replica.")}, 3, nil},
		{"a domain error is not retried", time.Minute, []error{domain}, 1, domain},
		{"no budget: one call", 0, []error{refused}, 1, refused},
		{"budget spent: the outage's error", 10 * time.Millisecond, []error{refused, refused, refused, refused, refused, refused, refused, refused}, 0, refused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			got, err := RetryUnavailable(context.Background(), tc.budget, func() (int, error) {
				calls++
				if calls <= len(tc.errs) {
					return 0, tc.errs[calls-1]
				}
				return 42, nil
			})
			if !errors.Is(err, tc.wantErr) || (err == nil && got != 42) {
				t.Errorf("RetryUnavailable = %d, %v; want 42 or the error %v", got, err, tc.wantErr)
			}
			if tc.wantCalls > 0 && calls != tc.wantCalls {
				t.Errorf("op called %d times, want %d", calls, tc.wantCalls)
			}
		})
	}
}
