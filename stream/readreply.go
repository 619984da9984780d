package stream

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The runner decodes XREADGROUP replies from their RESP bytes
// (redis.RawCmd), RESP2 or RESP3: go-redis's typed reply costs a dozen
// allocations per entry, this four (see BENCHMARKS.md, "The read path").

// errBadReply reports a reply that is not the shape of an XREADGROUP reply.
var errBadReply = errors.New("stream: malformed XREADGROUP reply")

// replyError is an error reply of the server, with its text. Like
// go-redis's own, it is a redis.Error.
type replyError string

func (e replyError) Error() string { return string(e) }

// RedisError marks it as a reply of the server.
func (replyError) RedisError() {}

// redirected reports whether err must go through go-redis's typed command,
// which follows it: a cluster redirect, or a replica's READONLY (go-redis
// then drops the connection and dials the new master).
func redirected(err error) bool {
	var re replyError
	if !errors.As(err, &re) {
		return false
	}
	return slices.ContainsFunc([]string{"MOVED ", "ASK ", "TRYAGAIN", "CLUSTERDOWN", "READONLY "},
		func(p string) bool { return strings.HasPrefix(string(re), p) })
}

// entryReuse holds the last type and trace context a partition's reads
// decoded, whose strings later equal entries reuse.
type entryReuse struct {
	typ, traceParent string
}

// str returns b as a string, last itself when the bytes are equal.
func str[T string | []byte](b T, last *string) string {
	if string(b) == *last {
		return *last
	}
	*last = string(b)
	return *last
}

// resp walks RESP bytes.
type resp struct {
	b []byte
	i int
}

// header reads a type line: its type byte and number (-1 for a null); an
// error reply is returned as a replyError.
func (r *resp) header() (byte, int, error) {
	if r.i >= len(r.b) {
		return 0, 0, errBadReply
	}
	end := bytes.IndexByte(r.b[r.i:], '\r')
	if end < 1 || r.i+end+1 >= len(r.b) || r.b[r.i+end+1] != '\n' {
		return 0, 0, errBadReply
	}
	kind, line := r.b[r.i], r.b[r.i+1:r.i+end]
	r.i += end + 2
	switch kind {
	case '-':
		return kind, 0, replyError(line)
	case '!': // RESP3 blob error
		n, ok := respLength(line)
		if !ok || n < 0 || r.i+n+2 > len(r.b) {
			return 0, 0, errBadReply
		}
		msg := r.b[r.i : r.i+n]
		r.i += n + 2
		return kind, 0, replyError(msg)
	case '_':
		return kind, -1, nil
	}
	n, ok := respLength(line)
	if !ok || n < -1 {
		return 0, 0, fmt.Errorf("%w: %q", errBadReply, line)
	}
	return kind, n, nil
}

// bulk reads a bulk string. A bulk string of at most 9,999,999 bytes, as
// almost every field is, is read inline; anything else takes header.
func (r *resp) bulk() ([]byte, error) {
	if b, i := r.b, r.i; i+3 < len(r.b) && b[i] == '$' {
		n, j := 0, i+1
		for ; j < len(b) && j < i+8 && b[j] >= '0' && b[j] <= '9'; j++ {
			n = n*10 + int(b[j]-'0')
		}
		if j > i+1 && j+1 < len(b) && b[j] == '\r' && b[j+1] == '\n' && j+2+n+2 <= len(b) {
			r.i = j + 2 + n + 2
			return b[j+2 : j+2+n], nil
		}
	}
	kind, n, err := r.header()
	if err != nil {
		return nil, err
	}
	if kind != '$' || n < 0 || r.i+n+2 > len(r.b) {
		return nil, errBadReply
	}
	s := r.b[r.i : r.i+n]
	r.i += n + 2
	return s, nil
}

// array reads an array's count, -1 for a null array.
func (r *resp) array() (int, error) {
	kind, n, err := r.header()
	if err != nil {
		return 0, err
	}
	if kind == '_' || (kind == '*' && n == -1) {
		return -1, nil
	}
	if kind != '*' {
		return 0, errBadReply
	}
	return n, nil
}

// parseReadReply returns the messages of a raw XREADGROUP reply over one
// stream (none for a null reply), or the server's error reply.
func parseReadReply(raw []byte, stream string, partition int, reuse *entryReuse) ([]*Message, error) {
	r := &resp{b: raw}
	kind, n, err := r.header()
	if err != nil || n == -1 {
		return nil, err
	}
	if (kind != '*' && kind != '%') || n != 1 {
		return nil, fmt.Errorf("%w: %d streams", errBadReply, n)
	}
	if kind == '*' { // RESP2: [[name, entries]]
		if pair, err := r.array(); err != nil || pair != 2 {
			return nil, errors.Join(errBadReply, err)
		}
	}
	if _, err := r.bulk(); err != nil { // the stream's name
		return nil, err
	}
	count, err := r.array()
	if err != nil || count < 0 {
		return nil, errors.Join(errBadReply, err)
	}
	msgs := make([]*Message, 0, count)
	for range count {
		m, err := r.entry(stream, partition, reuse)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// entry reads one entry: [id, fields], fields null for an entry deleted
// while pending, plus idle time and delivery count when the server adds them.
func (r *resp) entry(stream string, partition int, reuse *entryReuse) (*Message, error) {
	parts, err := r.array()
	if err != nil || (parts != 2 && parts != 4) {
		return nil, errors.Join(errBadReply, err)
	}
	id, err := r.bulk()
	if err != nil {
		return nil, err
	}
	m := &Message{ID: string(id), Stream: stream, Partition: partition, Attempt: 1}
	fields, err := r.array()
	if err != nil || (fields > 0 && fields%2 != 0) {
		return nil, errors.Join(errBadReply, err)
	}
	m.deleted = fields <= 0
	for i := 0; i < fields; i += 2 {
		k, err := r.bulk()
		if err != nil {
			return nil, err
		}
		v, err := r.bulk()
		if err != nil {
			return nil, err
		}
		setField(m, k, v, reuse)
	}
	for ; parts > 2; parts-- {
		if _, _, err := r.header(); err != nil {
			return nil, err
		}
	}
	_, before := retryFor(m)
	m.Attempt += before
	return m, nil
}

// setField sets the message's entry field k to v: Metadata unless it is
// one of the message's own.
func setField[T string | []byte](m *Message, k, v T, reuse *entryReuse) {
	switch {
	case string(k) == fieldKey:
		m.Key = string(v)
	case string(k) == fieldType:
		m.Type = str(v, &reuse.typ)
	case string(k) == fieldPayload:
		m.Payload = append([]byte{}, v...)
	case string(k) == MetaTraceParent:
		m.TraceParent = str(v, &reuse.traceParent)
	case string(k) == MetaTraceState:
		m.TraceState = string(v)
	default:
		if m.Metadata == nil {
			m.Metadata = make(map[string]string, 1)
		}
		m.Metadata[string(k)] = string(v)
	}
}

// respLength parses the number of a RESP type line: at most 10 decimal
// digits, or -1 for null.
func respLength(b []byte) (int, bool) {
	if string(b) == "-1" {
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
