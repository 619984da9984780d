package stream

import (
	"bytes"
	"context"
	"maps"
	"math"
	"strconv"
	"testing"
	"time"
)

// unitFields turns XADD values into the field map XREADGROUP returns: every
// value as a string. It fails on a repeated or non-string field name.
func unitFields(t testing.TB, v []any) map[string]any {
	t.Helper()
	if len(v)%2 != 0 {
		t.Fatalf("values() has odd length %d", len(v))
	}
	m := make(map[string]any, len(v)/2)
	for i := 0; i < len(v); i += 2 {
		name, ok := v[i].(string)
		if !ok {
			t.Fatalf("values()[%d] = %#v, want a string field name", i, v[i])
		}
		if _, dup := m[name]; dup {
			t.Fatalf("values() repeats field %q: %v", name, v)
		}
		switch val := v[i+1].(type) {
		case string:
			m[name] = val
		case []byte:
			m[name] = string(val)
		default:
			t.Fatalf("values() field %q has value %#v of type %T", name, val, val)
		}
	}
	return m
}

func TestMessage_valuesEncoding(t *testing.T) {
	tests := []struct {
		name string
		msg  *Message
		want map[string]any
	}{
		{"no metadata", NewMessage("k1", "t1", []byte("p1")),
			map[string]any{"key": "k1", "type": "t1", "payload": "p1"}},
		{"empty fields", &Message{},
			map[string]any{"key": "", "type": "", "payload": ""}},
		{"trace context and metadata", &Message{Key: "k", Type: "t", Payload: []byte{0, 1, 2},
			TraceParent: "tp", TraceState: "ts", Metadata: map[string]string{"x": ""}},
			map[string]any{"key": "k", "type": "t", "payload": "\x00\x01\x02", "traceparent": "tp", "tracestate": "ts", "x": ""}},
		{"metadata may not override the trace context", &Message{Key: "k", TraceParent: "tp",
			Metadata: map[string]string{MetaTraceParent: "evil", MetaTraceState: "evil"}},
			map[string]any{"key": "k", "type": "", "payload": "", "traceparent": "tp"}},
		{"metadata may not override reserved fields", &Message{Key: "real-key", Type: "real-type", Payload: []byte("real"),
			Metadata: map[string]string{"key": "evil", "type": "evil", "payload": "evil", "Key": "ok"}},
			map[string]any{"key": "real-key", "type": "real-type", "payload": "real", "Key": "ok"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.msg.values()
			// The reserved fields come first, in a fixed order.
			if len(v) < 6 || v[0] != fieldKey || v[2] != fieldType || v[4] != fieldPayload {
				t.Fatalf("values() = %v, want key, type and payload first", v)
			}
			if got := unitFields(t, v); !maps.Equal(got, tc.want) {
				t.Errorf("values() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMessage_decodeRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		msg  *Message
	}{
		{"plain", NewMessage("order-1", "order.v1", []byte(`{"a":1}`))},
		{"binary payload", NewMessage("k", "t", []byte{0xff, 0x00, 0x80})},
		{"empty", &Message{}},
		{"trace context and metadata", &Message{Key: "k", Type: "t", Payload: []byte("p"),
			TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", TraceState: "v=1", Metadata: map[string]string{"x": "y"}}},
		{"reserved metadata is dropped", &Message{Key: "k", Type: "t", Payload: []byte("p"),
			Metadata: map[string]string{"key": "evil", "x": "y"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := decodeMessage("ds:{f.3}:n", 3, "1700000000000-7", unitFields(t, tc.msg.values()))
			if got.Key != tc.msg.Key || got.Type != tc.msg.Type || !bytes.Equal(got.Payload, tc.msg.Payload) {
				t.Errorf("decoded key/type/payload = %q/%q/%q, want %q/%q/%q",
					got.Key, got.Type, got.Payload, tc.msg.Key, tc.msg.Type, tc.msg.Payload)
			}
			want := maps.Clone(tc.msg.Metadata)
			for _, r := range []string{fieldKey, fieldType, fieldPayload, MetaTraceParent, MetaTraceState} {
				delete(want, r)
			}
			if got.TraceParent != tc.msg.TraceParent || got.TraceState != tc.msg.TraceState {
				t.Errorf("decoded trace context %q %q, want %q %q", got.TraceParent, got.TraceState, tc.msg.TraceParent, tc.msg.TraceState)
			}
			if len(got.Metadata) != len(want) || !maps.Equal(got.Metadata, want) {
				t.Errorf("decoded metadata = %v, want %v", got.Metadata, want)
			}
			if got.ID != "1700000000000-7" || got.Stream != "ds:{f.3}:n" || got.Partition != 3 || got.Attempt != 1 {
				t.Errorf("decoded id/stream/partition/attempt = %q/%q/%d/%d", got.ID, got.Stream, got.Partition, got.Attempt)
			}
			if got.deleted {
				t.Error("an entry with fields decoded as deleted")
			}
		})
	}
}

func TestMessage_decodeDeletedAndOddFields(t *testing.T) {
	if m := decodeMessage("s", 0, "1-1", nil); !m.deleted || m.Attempt != 1 || m.ID != "1-1" {
		t.Errorf("nil fields: deleted=%v attempt=%d id=%q, want deleted, attempt 1", m.deleted, m.Attempt, m.ID)
	}
	if m := decodeMessage("s", 0, "1-1", map[string]any{}); !m.deleted {
		t.Error("empty fields: want deleted")
	}
	// Only a trace context, no other field: no metadata map.
	m := decodeMessage("s", 0, "1-1", map[string]any{"traceparent": "tp", "tracestate": "ts"})
	if m.deleted || m.Key != "" || m.TraceParent != "tp" || m.TraceState != "ts" || m.Metadata != nil {
		t.Errorf("trace-only entry decoded as %+v", m)
	}
	// Only metadata, no reserved fields.
	m = decodeMessage("s", 0, "1-1", map[string]any{"baggage": "b"})
	if m.deleted || m.Metadata["baggage"] != "b" || m.TraceParent != "" {
		t.Errorf("metadata-only entry decoded as %+v", m)
	}
	// Non-string values (not produced by go-redis) decode as empty strings.
	m = decodeMessage("s", 0, "1-1", map[string]any{"key": 42, "payload": nil, "x": 1.5})
	if m.Key != "" || len(m.Payload) != 0 || m.Metadata["x"] != "" {
		t.Errorf("non-string values decoded as %+v", m)
	}
}

func TestMessage_contextDefaultsToBackground(t *testing.T) {
	m := NewMessage("k", "t", nil)
	if m.Context() != context.Background() {
		t.Error("Context() of a new message is not context.Background()")
	}
	type ctxKey struct{}
	ctx := context.WithValue(context.Background(), ctxKey{}, 1)
	m.SetContext(ctx)
	if m.Context() != ctx {
		t.Error("Context() does not return the context set with SetContext")
	}
}

func TestMessage_publishedAt(t *testing.T) {
	tests := []struct {
		id   string
		want time.Time
	}{
		{"1700000000123-0", time.UnixMilli(1700000000123)},
		{"1700000000123-99", time.UnixMilli(1700000000123)},
		{"0-1", time.UnixMilli(0)},
		{"", time.Time{}},
		{"1700000000123", time.Time{}},
		{"-1", time.Time{}},
		{"abc-1", time.Time{}},
	}
	for _, tc := range tests {
		m := &Message{ID: tc.id}
		if got := m.PublishedAt(); !got.Equal(tc.want) || got.IsZero() != tc.want.IsZero() {
			t.Errorf("PublishedAt(%q) = %v, want %v", tc.id, got, tc.want)
		}
	}
}

func TestMessageID_idMillis(t *testing.T) {
	tests := []struct {
		id   string
		ms   int64
		want bool
	}{
		{"1700000000123-0", 1700000000123, true},
		{"0-0", 0, true},
		{"9223372036854775807-0", math.MaxInt64, true},
		{"", 0, false},
		{"-", 0, false},
		{"-5", 0, false},
		{"123", 0, false},
		{"x-1", 0, false},
		{"1.5-1", 0, false},
		{"9223372036854775808-0", 0, false}, // beyond int64 milliseconds
	}
	for _, tc := range tests {
		ms, ok := idMillis(tc.id)
		if ok != tc.want || (ok && ms != tc.ms) {
			t.Errorf("idMillis(%q) = %d, %v; want %d, %v", tc.id, ms, ok, tc.ms, tc.want)
		}
	}
}

func TestMessageID_parseID(t *testing.T) {
	tests := []struct {
		id      string
		ms, seq uint64
		ok      bool
	}{
		{"1-2", 1, 2, true},
		{"0-0", 0, 0, true},
		{"1700000000123-42", 1700000000123, 42, true},
		{"18446744073709551615-18446744073709551615", math.MaxUint64, math.MaxUint64, true},
		{"", 0, 0, false},
		{"-", 0, 0, false},
		{"-1", 0, 0, false},
		{"1", 0, 0, false},
		{"1-", 0, 0, false},
		{"1-x", 0, 0, false},
		{"x-1", 0, 0, false},
		{"1-2-3", 0, 0, false},
		{"+1-2", 0, 0, false},
		{"1--2", 0, 0, false},
		{" 1-2", 0, 0, false},
		{"18446744073709551616-0", 0, 0, false},
		{"*", 0, 0, false},
		{"$", 0, 0, false},
	}
	for _, tc := range tests {
		ms, seq, ok := parseID(tc.id)
		if ok != tc.ok || (ok && (ms != tc.ms || seq != tc.seq)) {
			t.Errorf("parseID(%q) = %d, %d, %v; want %d, %d, %v", tc.id, ms, seq, ok, tc.ms, tc.seq, tc.ok)
		}
	}
}

func TestMessageID_compareIDs(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"1-0", "1-0", 0},
		{"1-0", "1-1", -1},
		{"1-1", "1-0", 1},
		{"1-9", "2-0", -1},
		{"2-0", "1-9", 1},
		{"9-0", "10-0", -1}, // numeric, not lexical
		{"1-9", "1-10", -1},
		{"0-0", "0-1", -1},
		{"18446744073709551615-0", "18446744073709551614-18446744073709551615", 1},
		{"", "", 0},
		{"bad", "bad", 0},
	}
	for _, tc := range tests {
		if got := compareIDs(tc.a, tc.b); got != tc.want {
			t.Errorf("compareIDs(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := compareIDs(tc.b, tc.a); got != -tc.want {
			t.Errorf("compareIDs(%q, %q) = %d, want %d", tc.b, tc.a, got, -tc.want)
		}
	}
}

// compareIDs documents "malformed IDs sort first": before every valid ID.
func TestMessageID_compareIDsMalformedSortFirst(t *testing.T) {
	malformed := []string{"", "bad", "-", "1-", "5-x", "x-5", "99999999999999999999-0", "5-99999999999999999999"}
	valid := []string{"0-1", "1-0", "5-0", "5-1", "1700000000000-0"}
	for _, m := range malformed {
		for _, v := range valid {
			if got := compareIDs(m, v); got != -1 {
				t.Errorf("compareIDs(%q, %q) = %d, want -1 (malformed first)", m, v, got)
			}
			if got := compareIDs(v, m); got != 1 {
				t.Errorf("compareIDs(%q, %q) = %d, want 1 (malformed first)", v, m, got)
			}
		}
	}
}

func TestMessageID_nextID(t *testing.T) {
	tests := []struct{ id, want string }{
		{"0-0", "0-1"},
		{"1-0", "1-1"},
		{"1700000000123-41", "1700000000123-42"},
		{"18446744073709551615-5", "18446744073709551615-6"},
		// The smallest ID after the last sequence number of a millisecond
		// is the next millisecond's first (as Redis itself increments IDs).
		{"5-18446744073709551615", "6-0"},
		{"", "0-0"},
		{"bad", "0-0"},
		{"1-x", "0-0"},
	}
	for _, tc := range tests {
		got := nextID(tc.id)
		if got != tc.want {
			t.Errorf("nextID(%q) = %q, want %q", tc.id, got, tc.want)
		}
		if _, _, ok := parseID(tc.id); ok && compareIDs(got, tc.id) != 1 {
			t.Errorf("nextID(%q) = %q does not sort after it", tc.id, got)
		}
	}
}

// FuzzDecodeMessage decodes arbitrary entry fields, re-encodes them and
// decodes again: nothing panics and key, type and payload survive.
func FuzzDecodeMessage(f *testing.F) {
	f.Add("key", "k1", "type", "t1", "payload", "p1", "traceparent", "tp")
	f.Add("x", "", "key", "\x00", "payload", "", "key", "dup")
	f.Add("", "", "", "", "", "", "", "")
	f.Add("type", "a", "tracestate", "b", "Key", "c", "payload", "\xff")
	f.Fuzz(func(t *testing.T, n1, v1, n2, v2, n3, v3, n4, v4 string) {
		fields := map[string]any{n1: v1, n2: v2, n3: v3, n4: v4}
		m := decodeMessage("s", 1, "1-1", fields)
		want := func(name string) string { s, _ := fields[name].(string); return s }
		if m.Key != want(fieldKey) || m.Type != want(fieldType) || string(m.Payload) != want(fieldPayload) {
			t.Fatalf("decode(%q) = %q/%q/%q", fields, m.Key, m.Type, m.Payload)
		}
		if m.TraceParent != want(MetaTraceParent) || m.TraceState != want(MetaTraceState) {
			t.Fatalf("decode(%q): trace context %q %q", fields, m.TraceParent, m.TraceState)
		}
		for name, v := range fields {
			if !reservedField(name) && m.Metadata[name] != v {
				t.Fatalf("decode(%q): metadata %q = %q, want %q", fields, name, m.Metadata[name], v)
			}
		}
		again := decodeMessage("s", 1, "1-1", unitFields(t, m.values()))
		if again.Key != m.Key || again.Type != m.Type || !bytes.Equal(again.Payload, m.Payload) ||
			again.TraceParent != m.TraceParent || again.TraceState != m.TraceState || !maps.Equal(again.Metadata, m.Metadata) {
			t.Fatalf("round trip of %+v gave %+v", m, again)
		}
		// Encoding a message built by hand with the same strings as metadata
		// never lets metadata replace the reserved fields or the trace
		// context.
		built := &Message{Key: v1, Type: v2, Payload: []byte(v3),
			Metadata: map[string]string{n1: v4, n2: v4, n3: v4, n4: v4}}
		back := decodeMessage("s", 1, "1-1", unitFields(t, built.values()))
		if back.Key != v1 || back.Type != v2 || string(back.Payload) != v3 || back.TraceParent != "" || back.TraceState != "" {
			t.Fatalf("metadata %q overrode key/type/payload/trace context %q/%q/%q: got %q/%q/%q/%q/%q",
				built.Metadata, v1, v2, v3, back.Key, back.Type, back.Payload, back.TraceParent, back.TraceState)
		}
	})
}

// FuzzParseID checks that parseID and compareIDs agree with each other:
// compareIDs is a consistent order, and valid IDs compare numerically.
func FuzzParseID(f *testing.F) {
	f.Add("1-0", "1-1")
	f.Add("1700000000000-5", "bad")
	f.Add("", "-")
	f.Add("18446744073709551615-18446744073709551614", "0-0")
	f.Add("5-x", "5-0")
	f.Fuzz(func(t *testing.T, a, b string) {
		if c := compareIDs(a, a); c != 0 {
			t.Fatalf("compareIDs(%q, %q) = %d, want 0", a, a, c)
		}
		ab, ba := compareIDs(a, b), compareIDs(b, a)
		if ab != -ba || ab < -1 || ab > 1 {
			t.Fatalf("compareIDs(%q, %q) = %d but compareIDs(%q, %q) = %d", a, b, ab, b, a, ba)
		}
		am, as, aok := parseID(a)
		bm, bs, bok := parseID(b)
		if aok {
			// The canonical form of a parsed ID compares equal and parses back.
			canon := strconv.FormatUint(am, 10) + "-" + strconv.FormatUint(as, 10)
			if cm, cs, ok := parseID(canon); !ok || cm != am || cs != as || compareIDs(a, canon) != 0 {
				t.Fatalf("parseID(%q) = %d-%d, but its canonical form %q does not round-trip", a, am, as, canon)
			}
			if ms, ok := idMillis(a); am <= math.MaxInt64 && (!ok || uint64(ms) != am) {
				t.Fatalf("idMillis(%q) = %d, %v; parseID gave ms %d", a, ms, ok, am)
			}
			if as < math.MaxUint64 {
				if n := nextID(a); compareIDs(n, a) != 1 {
					t.Fatalf("nextID(%q) = %q does not sort after it", a, n)
				}
			}
		}
		if aok && bok {
			want := 0
			switch {
			case am < bm || am == bm && as < bs:
				want = -1
			case am > bm || am == bm && as > bs:
				want = 1
			}
			if ab != want {
				t.Fatalf("compareIDs(%q, %q) = %d, want %d", a, b, ab, want)
			}
		}
	})
}
