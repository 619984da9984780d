package stream

import (
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// IsUnavailable reports whether err says Redis cannot serve for now (a
// refused, reset or timed-out connection, an exhausted pool, a server
// loading, a replica during a failover, a slot without a master) rather
// than that a command failed: callers answer "try again later" (503).
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var op *net.OpError
	if errors.Is(err, ErrNotReplicated) || errors.As(err, &op) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrClosed) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	msg := err.Error()
	return slices.ContainsFunc([]string{"LOADING ", "READONLY ", "CLUSTERDOWN ", "MASTERDOWN ", "TRYAGAIN "},
		func(p string) bool { return strings.HasPrefix(msg, p) || strings.Contains(msg, ": "+p) }) ||
		strings.Contains(msg, "connection refused") || strings.Contains(msg, "i/o timeout") ||
		strings.Contains(msg, "unexpected read from socket") // go-redis: a pooled connection with stray data
}
