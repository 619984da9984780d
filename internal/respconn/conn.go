// Package respconn is a minimal Redis connection for a hot read path: it
// sends a pipeline of commands and returns each reply as its raw RESP
// bytes, read straight from the socket into a buffer the connection keeps.
//
// go-redis reads a raw reply (redis.RawCmd) by appending it line by line
// to a new slice, which for a batch of stream entries (100 KB and more)
// means dozens of reallocations and copies of the reply per read: most of
// what reading a batch costs. Here the bytes are copied once, by the
// kernel, into a buffer reused from one read to the next.
//
// A Conn is set up from a go-redis client's options (dialer, TLS,
// credentials, database, client name), speaks RESP2, and is not safe for
// concurrent use. Any I/O or protocol error breaks it: the caller closes
// it and dials again. An error reply of the server is a reply like any
// other and leaves the connection usable.
package respconn

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrUnsupported reports options a Conn cannot honour (a streaming
// credentials provider): the caller stays with go-redis.
var ErrUnsupported = errors.New("respconn: client options not supported")

// Conn is one connection. Replies returned by Do are valid until the next
// call of Do.
type Conn struct {
	nc           net.Conn
	readTimeout  time.Duration // 0: no deadline
	writeTimeout time.Duration
	out          []byte // the commands being sent
	in           []byte // the replies being read
	scan         scanner
	broken       error
}

// Supported reports whether Dial can connect as a client with opt does.
func Supported(opt *redis.Options) bool {
	return opt != nil && opt.StreamingCredentialsProvider == nil
}

// Dial connects as a client with opt would: through its dialer, then
// authenticating, selecting its database and naming the connection as
// go-redis does. Timeouts follow opt (go-redis's defaults for zero
// values: 5s to dial, 3s to read, the read timeout to write).
func Dial(ctx context.Context, opt *redis.Options) (*Conn, error) {
	if !Supported(opt) {
		return nil, ErrUnsupported
	}
	dial := opt.Dialer
	if dial == nil {
		d := &net.Dialer{Timeout: cmp.Or(opt.DialTimeout, 5*time.Second), KeepAlive: 5 * time.Minute}
		dial = d.DialContext
	}
	network := cmp.Or(opt.Network, "tcp")
	nc, err := dial(ctx, network, opt.Addr)
	if err != nil {
		return nil, fmt.Errorf("respconn: dial %s: %w", opt.Addr, err)
	}
	c := &Conn{nc: nc, readTimeout: timeout(opt.ReadTimeout, 3*time.Second)}
	c.writeTimeout = timeout(opt.WriteTimeout, c.readTimeout)
	if err := c.hello(ctx, opt); err != nil {
		_ = nc.Close()
		return nil, err
	}
	return c, nil
}

// timeout maps a go-redis timeout to a deadline length: 0 takes def,
// negative values (no deadline) 0.
func timeout(v, def time.Duration) time.Duration {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// hello authenticates, selects the database and names the connection, in
// one round trip.
func (c *Conn) hello(ctx context.Context, opt *redis.Options) error {
	user, pass := opt.Username, opt.Password
	switch {
	case opt.CredentialsProviderContext != nil:
		var err error
		if user, pass, err = opt.CredentialsProviderContext(ctx); err != nil {
			return fmt.Errorf("respconn: credentials: %w", err)
		}
	case opt.CredentialsProvider != nil:
		user, pass = opt.CredentialsProvider()
	}
	var cmds [][]any
	switch {
	case pass != "" && user != "":
		cmds = append(cmds, []any{"auth", user, pass})
	case pass != "":
		cmds = append(cmds, []any{"auth", pass})
	}
	if opt.DB > 0 {
		cmds = append(cmds, []any{"select", opt.DB})
	}
	if opt.ClientName != "" {
		cmds = append(cmds, []any{"client", "setname", opt.ClientName})
	}
	if len(cmds) == 0 {
		return nil
	}
	replies, err := c.Do(ctx, cmds...)
	if err != nil {
		return err
	}
	for i, r := range replies {
		if err := ReplyError(r); err != nil {
			return fmt.Errorf("respconn: %s: %w", cmds[i][0], err)
		}
	}
	return nil
}

// Close closes the connection.
func (c *Conn) Close() error { return c.nc.Close() }

// Broken returns the error that broke the connection, nil while it is
// usable.
func (c *Conn) Broken() error { return c.broken }

// Do sends cmds in one write and returns their replies, in order, as raw
// RESP bytes (error replies included). Arguments are strings, byte
// slices, integers or floats. When ctx ends first, the wait is cut short
// and the connection is broken.
func (c *Conn) Do(ctx context.Context, cmds ...[]any) ([][]byte, error) {
	if c.broken != nil {
		return nil, c.broken
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.out = c.out[:0]
	for _, cmd := range cmds {
		var err error
		if c.out, err = appendCommand(c.out, cmd); err != nil {
			return nil, err // nothing was sent: the connection is fine
		}
	}
	// The deadlines are set before the context can cut them short, so
	// that a context ending at once is not undone by them.
	if err := c.nc.SetWriteDeadline(deadline(c.writeTimeout)); err != nil {
		c.broken = fmt.Errorf("respconn: %w", err)
		return nil, c.broken
	}
	if err := c.nc.SetReadDeadline(deadline(c.readTimeout)); err != nil {
		c.broken = fmt.Errorf("respconn: %w", err)
		return nil, c.broken
	}
	stop := func() bool { return true }
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(time.Now()) })
	}
	replies, err := c.roundTrip(len(cmds))
	if !stop() && ctx.Err() != nil {
		err = errors.Join(ctx.Err(), err)
	}
	if err != nil {
		c.broken = cmp.Or(c.broken, err)
		return nil, err
	}
	return replies, nil
}

func (c *Conn) roundTrip(n int) ([][]byte, error) {
	if _, err := c.nc.Write(c.out); err != nil {
		return nil, fmt.Errorf("respconn: write: %w", err)
	}
	if cap(c.in) > maxKept {
		c.in = nil // one huge reply should not pin its buffer for good
	}
	c.in = c.in[:0]
	c.scan.reset()
	ends := make([]int, 0, n)
	for len(ends) < n {
		for len(ends) < n {
			end, err := c.scan.value(c.in)
			if err != nil {
				return nil, err
			}
			if end < 0 {
				break
			}
			ends = append(ends, end)
			c.scan.reset()
			c.scan.pos = end
		}
		if len(ends) == n {
			break
		}
		if err := c.fill(); err != nil {
			return nil, err
		}
	}
	replies := make([][]byte, n)
	start := 0
	for i, end := range ends {
		replies[i] = c.in[start:end:end]
		start = end
	}
	if start != len(c.in) {
		return nil, fmt.Errorf("respconn: %d bytes after the last reply", len(c.in)-start)
	}
	return replies, nil
}

// fill reads what the socket has into c.in, growing it when full.
func (c *Conn) fill() error {
	if len(c.in) == cap(c.in) {
		grown := make([]byte, len(c.in), max(64<<10, 2*cap(c.in)))
		copy(grown, c.in)
		c.in = grown
	}
	n, err := c.nc.Read(c.in[len(c.in):cap(c.in)])
	c.in = c.in[:len(c.in)+n]
	if err != nil {
		return fmt.Errorf("respconn: read: %w", err)
	}
	return nil
}

// maxKept is the largest read buffer a connection keeps between calls.
const maxKept = 4 << 20

func deadline(d time.Duration) time.Time {
	if d == 0 {
		return time.Time{}
	}
	return time.Now().Add(d)
}

// appendCommand appends cmd as a RESP array of bulk strings.
func appendCommand(b []byte, cmd []any) ([]byte, error) {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(cmd)), 10)
	b = append(b, '\r', '\n')
	for _, a := range cmd {
		switch v := a.(type) {
		case string:
			b = appendBulk(b, v)
		case []byte:
			b = appendBulk(b, string(v))
		case int:
			b = appendInt(b, int64(v))
		case int64:
			b = appendInt(b, v)
		case float64:
			b = appendBulk(b, strconv.FormatFloat(v, 'f', -1, 64))
		default:
			return nil, fmt.Errorf("respconn: argument of type %T", a)
		}
	}
	return b, nil
}

func appendInt(b []byte, v int64) []byte {
	var digits [20]byte
	return appendBulk(b, string(strconv.AppendInt(digits[:0], v, 10)))
}

func appendBulk(b []byte, s string) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, '\r', '\n')
	b = append(b, s...)
	return append(b, '\r', '\n')
}
