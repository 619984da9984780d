package stream

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

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
