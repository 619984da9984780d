package respconn

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// ErrProtocol reports bytes that are not RESP.
var ErrProtocol = errors.New("respconn: malformed reply")

// Limits on what a reply may hold, so that a broken peer cannot make the
// reader buffer without end.
const (
	maxLine  = 64 << 10 // a simple string or error line
	maxBulk  = 512 << 20
	maxDepth = 32
)

// Error is an error reply of the server. Like go-redis's own, it is a
// redis.Error, and its text is the server's.
type Error string

func (e Error) Error() string { return string(e) }

// RedisError marks it as a reply of the server.
func (Error) RedisError() {}

var _ redis.Error = Error("")

// ReplyError returns the error a raw reply holds (a simple or blob error),
// nil for any other reply.
func ReplyError(raw []byte) error {
	if len(raw) < 3 {
		return nil
	}
	switch raw[0] {
	case '-':
		return Error(raw[1 : len(raw)-2])
	case '!':
		if i := bytes.IndexByte(raw, '\n'); i > 0 && len(raw) >= i+3 {
			return Error(raw[i+1 : len(raw)-2])
		}
	}
	return nil
}

// scanner finds where a RESP value ends in bytes that arrive in pieces:
// it remembers how far it got (pos, and the elements still to come of
// each open aggregate), so each byte is looked at about once however the
// value is split.
type scanner struct {
	pos   int
	stack []int
}

func (s *scanner) reset() {
	s.pos = 0
	s.stack = s.stack[:0]
}

// value advances over b from s.pos and returns the end of the value once
// it is complete, -1 when b ends first: call again with b grown.
func (s *scanner) value(b []byte) (int, error) {
	for {
		i := s.pos
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			if len(b)-i > maxLine {
				return 0, fmt.Errorf("%w: line longer than %d bytes", ErrProtocol, maxLine)
			}
			return -1, nil
		}
		if j < 2 || b[i+j-1] != '\r' {
			return 0, fmt.Errorf("%w: line without a type or CRLF", ErrProtocol)
		}
		kind, body, next := b[i], b[i+1:i+j-1], i+j+1
		children := 0
		switch kind {
		case '+', '-', ':', ',', '#', '(', '_':
		case '$', '!', '=':
			n, ok := Length(body)
			if !ok || n < -1 || n > maxBulk {
				return 0, fmt.Errorf("%w: bulk length %q", ErrProtocol, body)
			}
			if n >= 0 {
				if next+n+2 > len(b) {
					return -1, nil
				}
				if b[next+n] != '\r' || b[next+n+1] != '\n' {
					return 0, fmt.Errorf("%w: bulk string without CRLF", ErrProtocol)
				}
				next += n + 2
			}
		case '*', '~', '>', '%':
			n, ok := Length(body)
			if !ok || n < -1 {
				return 0, fmt.Errorf("%w: aggregate length %q", ErrProtocol, body)
			}
			children = max(n, 0)
			if kind == '%' {
				children *= 2
			}
		default:
			return 0, fmt.Errorf("%w: type %q", ErrProtocol, kind)
		}
		s.pos = next
		if children > 0 {
			if len(s.stack) == maxDepth {
				return 0, fmt.Errorf("%w: nested deeper than %d", ErrProtocol, maxDepth)
			}
			s.stack = append(s.stack, children)
			continue
		}
		for {
			if len(s.stack) == 0 {
				return s.pos, nil
			}
			top := len(s.stack) - 1
			if s.stack[top]--; s.stack[top] > 0 {
				break
			}
			s.stack = s.stack[:top]
		}
	}
}

// Length parses the number of a RESP type line (a bulk string's length,
// an aggregate's count): decimal digits, at most 10, or -1 for null.
func Length(b []byte) (int, bool) {
	if len(b) == 2 && b[0] == '-' && b[1] == '1' {
		return -1, true
	}
	if len(b) == 0 || len(b) > 10 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
