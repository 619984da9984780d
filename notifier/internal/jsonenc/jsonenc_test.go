package jsonenc

import (
	"encoding/json"
	"testing"
	"time"
)

func TestString_matchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", "a\"b", "back\\slash", "<html>&", "tab\there\nnl", "\x00\x1f\x7f", "café", "\u2028\u2029", "bad \xff"} {
		want, _ := json.Marshal(s)
		if got := String([]byte("x"), s); string(got) != "x"+string(want) {
			t.Errorf("String(%q) = %s, want x%s", s, got, want)
		}
	}
}

func TestTime_matchesMarshalJSON(t *testing.T) {
	base := time.Date(2026, 11, 29, 1, 2, 3, 0, time.UTC)
	for _, tm := range []time.Time{
		base, base.Add(456 * time.Millisecond), base.Add(time.Nanosecond), base.In(time.FixedZone("", 5*3600+45*60)),
		base.In(time.FixedZone("", -8*3600)), {}, time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), base.In(time.FixedZone("", 24*3600)), base.In(time.FixedZone("", 30)),
	} {
		want, werr := tm.MarshalJSON()
		got, gerr := Time(nil, tm)
		if (werr != nil) != (gerr != nil) || (werr == nil && string(got) != string(want)) {
			t.Errorf("Time(%v) = %s, %v; want %s, %v", tm, got, gerr, want, werr)
		}
	}
}

func TestRaw_matchesEncodingJSON(t *testing.T) {
	for _, raw := range []string{`{"i":1}`, ` { "a" : [1, 2] } `, `{"h":"<b>&"}`, "\"\u2028\"", `"\u00e9"`, `{bad`, ``, `null`} {
		want, werr := json.Marshal(json.RawMessage(raw))
		got, gerr := Raw([]byte("x"), json.RawMessage(raw))
		if (werr != nil) != (gerr != nil) || (werr == nil && string(got) != "x"+string(want)) {
			t.Errorf("Raw(%q) = %s, %v; want x%s, %v", raw, got, gerr, want, werr)
		}
	}
}

func TestField_commas(t *testing.T) {
	b := Int(Field([]byte("{"), "a", true), 1)
	b = Bool(Field(b, "b", false), true)
	if got := string(append(b, '}')); got != `{"a":1,"b":true}` {
		t.Errorf("got %s", got)
	}
}
