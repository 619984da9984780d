package stream

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"unsafe"
)

// replyEntry is an entry of a reply built by encodeReadReply; nil fields
// is an entry deleted while pending.
type replyEntry struct {
	id     string
	fields []string // name, value, name, value, ...
}

// encodeReadReply writes the XREADGROUP reply over one stream as Redis
// does in RESP2 or RESP3; no entries is the null reply.
func encodeReadReply(resp3 bool, stream string, entries []replyEntry) string {
	var b strings.Builder
	bulk := func(s string) { fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(s), s) }
	null := "*-1\r\n"
	if resp3 {
		null = "_\r\n"
	}
	if len(entries) == 0 {
		return null
	}
	if resp3 {
		b.WriteString("%1\r\n")
	} else {
		b.WriteString("*1\r\n*2\r\n")
	}
	bulk(stream)
	fmt.Fprintf(&b, "*%d\r\n", len(entries))
	for _, e := range entries {
		b.WriteString("*2\r\n")
		bulk(e.id)
		if e.fields == nil {
			b.WriteString(null)
			continue
		}
		fmt.Fprintf(&b, "*%d\r\n", len(e.fields))
		for _, f := range e.fields {
			bulk(f)
		}
	}
	return b.String()
}

// fieldMap is fields as go-redis hands them to decodeMessage.
func fieldMap(fields []string) map[string]any {
	m := map[string]any{}
	for i := 0; i+1 < len(fields); i += 2 {
		m[fields[i]] = fields[i+1]
	}
	return m
}

func sameMessage(a, b *Message) bool {
	return a.ID == b.ID && a.Stream == b.Stream && a.Partition == b.Partition && a.Key == b.Key && a.Type == b.Type &&
		bytes.Equal(a.Payload, b.Payload) && a.TraceParent == b.TraceParent && a.TraceState == b.TraceState &&
		maps.Equal(a.Metadata, b.Metadata) && a.Attempt == b.Attempt && a.deleted == b.deleted
}

func TestParseReadReply_readsWhatGoRedisDecodes(t *testing.T) {
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	entries := []replyEntry{
		{"1700000000000-1", []string{"key", "k1", "type", "seen", "payload", "{\"a\":1}", "traceparent", tp}},
		{"1700000000000-2", []string{"key", "k2", "type", "seen", "payload", "", "traceparent", tp}},
		{"1700000000001-0", nil},
		{"1700000000002-0", []string{"key", "k3", "type", "gone", "payload", "\x00\xff\r\n$3\r\n", "tracestate", "v=1",
			"baggage", "tenant=acme", MetaRetryGroup, "g", MetaRetryAttempts, "2", "key", "dup"}},
	}
	for _, resp3 := range []bool{false, true} {
		for _, n := range []int{0, 1, len(entries)} {
			t.Run(fmt.Sprintf("resp3=%v/entries=%d", resp3, n), func(t *testing.T) {
				raw := encodeReadReply(resp3, "avail.raw:{2}", entries[:n])
				var reuse entryReuse
				got, err := parseReadReply([]byte(raw), "avail.raw:{2}", 2, &reuse)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != n {
					t.Fatalf("%d messages, want %d", len(got), n)
				}
				for i, e := range entries[:n] {
					want := decodeMessage("avail.raw:{2}", 2, e.id, fieldMap(e.fields))
					if !sameMessage(got[i], want) {
						t.Errorf("entry %d: got %+v, want %+v", i, got[i], want)
					}
				}
				if n > 1 && got[1].Payload == nil {
					t.Error("an empty payload reads as nil, not empty")
				}
			})
		}
	}
}

func TestParseReadReply_errorsAndBadReplies(t *testing.T) {
	good := encodeReadReply(false, "s", []replyEntry{{"1-1", []string{"key", "k", "payload", "p"}}})
	tests := []struct {
		name      string
		raw       string
		noGroup   bool
		redirect  bool
		serverErr bool
	}{
		{name: "no group", raw: "-NOGROUP No such key 's' or consumer group 'g'\r\n", noGroup: true, serverErr: true},
		{name: "moved", raw: "-MOVED 3999 127.0.0.1:6381\r\n", redirect: true, serverErr: true},
		{name: "ask", raw: "-ASK 3999 127.0.0.1:6381\r\n", redirect: true, serverErr: true},
		{name: "readonly", raw: "-READONLY You can't write against a read only replica.\r\n", redirect: true, serverErr: true},
		{name: "resp3 blob error", raw: "!21\r\nNOGROUP no such group\r\n", noGroup: true, serverErr: true},
		{name: "empty", raw: ""},
		{name: "truncated", raw: good[:len(good)-3]},
		{name: "cut in a header", raw: good[:5]},
		{name: "bulk longer than the reply", raw: strings.Replace(good, "$1\r\np", "$9\r\np", 1)},
		{name: "odd field count", raw: strings.Replace(good, "*4\r\n", "*3\r\n", 1)},
		{name: "two streams", raw: "*2\r\n" + good[4:]},
		{name: "not a number", raw: "*x\r\n"},
		{name: "an integer", raw: ":1\r\n"},
		{name: "entry of three parts", raw: strings.Replace(good, "*2\r\n$3\r\n1-1", "*3\r\n$3\r\n1-1", 1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msgs, err := parseReadReply([]byte(tc.raw), "s", 0, &entryReuse{})
			if err == nil {
				t.Fatalf("no error, %d messages", len(msgs))
			}
			var re replyError
			if errors.As(err, &re) != tc.serverErr || isNoGroup(err) != tc.noGroup || redirected(err) != tc.redirect {
				t.Errorf("error %v: server error %v, no group %v, redirect %v; want %v, %v, %v",
					err, errors.As(err, &re), isNoGroup(err), redirected(err), tc.serverErr, tc.noGroup, tc.redirect)
			}
			if !tc.serverErr && !errors.Is(err, errBadReply) {
				t.Errorf("error %v is not errBadReply", err)
			}
		})
	}
}

func TestParseReadReply_equalStringsAreShared(t *testing.T) {
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
	e := func(id, typ string) replyEntry {
		return replyEntry{id, []string{"key", "k", "type", typ, "payload", "p", "traceparent", tp}}
	}
	raw := encodeReadReply(true, "s", []replyEntry{e("1-1", "seen"), e("1-2", "seen"), e("1-3", "gone")})
	var reuse entryReuse
	msgs, err := parseReadReply([]byte(raw), "s", 0, &reuse)
	if err != nil {
		t.Fatal(err)
	}
	next, err := parseReadReply([]byte(raw), "s", 0, &reuse)
	if err != nil {
		t.Fatal(err)
	}
	same := func(a, b string) bool { return len(a) > 0 && unsafe.StringData(a) == unsafe.StringData(b) }
	if !same(msgs[0].TraceParent, msgs[2].TraceParent) || !same(msgs[0].TraceParent, next[0].TraceParent) {
		t.Error("equal trace contexts of consecutive entries are not one string")
	}
	if !same(msgs[0].Type, msgs[1].Type) || msgs[2].Type != "gone" || same(msgs[1].Type, msgs[2].Type) {
		t.Errorf("types %q %q %q: want the first two shared", msgs[0].Type, msgs[1].Type, msgs[2].Type)
	}
	msgs[0].Payload[0] = 'x'
	if string(msgs[1].Payload) != "p" || string(next[0].Payload) != "p" {
		t.Error("payloads share memory")
	}
}

func FuzzParseReadReply(f *testing.F) {
	f.Add(true, "k", "t", "p", "traceparent", "tp", "x", "y")
	f.Add(false, "", "", "", "", "", "", "")
	f.Add(true, "\r\n", "$-1\r\n", "*2", "_\r\n", "%1", "-ERR", "key")
	f.Fuzz(func(t *testing.T, resp3 bool, key, typ, payload, n1, v1, n2, v2 string) {
		fields := []string{"key", key, "type", typ, "payload", payload, n1, v1, n2, v2}
		entries := []replyEntry{{"5-1", fields}, {"5-2", nil}, {"5-3", fields[4:]}}
		raw := encodeReadReply(resp3, "s", entries)
		msgs, err := parseReadReply([]byte(raw), "s", 1, &entryReuse{})
		if err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		for i, e := range entries {
			if want := decodeMessage("s", 1, e.id, fieldMap(e.fields)); !sameMessage(msgs[i], want) {
				t.Fatalf("entry %d: got %+v, want %+v", i, msgs[i], want)
			}
		}
		// Any cut of the reply is an error, never a panic or a message
		// made up.
		for cut := 0; cut < len(raw); cut += 1 + len(raw)/40 {
			if _, err := parseReadReply([]byte(raw[:cut]), "s", 1, &entryReuse{}); err == nil {
				t.Fatalf("reply cut at %d of %d parsed", cut, len(raw))
			}
		}
	})
}

// isNoGroup is the runner's test for a missing group.
func isNoGroup(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOGROUP")
}
