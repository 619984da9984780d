package notifier

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	gojson "github.com/goccy/go-json"

	"github.com/dropstream/dropstream/notifier/subscriber"
)

// requestInputs are requests as published, and forms json.Unmarshal reads
// otherwise or refuses.
func requestInputs(t testing.TB) map[string]string {
	full, err := json.Marshal(Request{Flow: "comic", Event: "comic.match", Subject: "item:1", SubscriberID: "s_1", DestinationID: "d_1",
		Window: "w", Critical: true, Title: "T", Text: "café", HTML: "<b>x</b>", Payload: json.RawMessage(`{"i":[1,"}"],"s":"\""}`),
		ObservedAt: time.Date(2026, 11, 29, 1, 2, 3, 4, time.FixedZone("", 3600)), TraceID: "t", EventID: "e", RunID: "r", Digest: true})
	if err != nil {
		t.Fatal(err)
	}
	inline, err := json.Marshal(Request{Flow: "f", Event: "e", Subject: "s", Window: "w",
		Destination: &subscriber.Destination{Kind: subscriber.KindWebhook, Address: "https://example.com/h"}})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		"full":              string(full),
		"inline":            string(inline),
		"empty":             `{}`,
		"spaced":            " {\n \"flow\" : \"f\" ,\t\"payload\" : [ 1 , 2 ] , \"critical\" : false } ",
		"number payload":    `{"payload":12.5e3,"flow":"f"}`,
		"string payload":    `{"payload":"x\"y"}`,
		"null payload":      `{"payload":null}`,
		"null string":       `{"flow":null}`,
		"escaped string":    `{"flow":"a\u00e9\n"}`,
		"folded key":        `{"FLOW":"f"}`,
		"unknown key":       `{"other":1,"flow":"f"}`,
		"duplicate key":     `{"flow":"a","flow":"b"}`,
		"invalid utf-8":     "{\"flow\":\"\xff\"}",
		"bad time":          `{"observed_at":"yesterday"}`,
		"bad payload":       `{"payload":{"a":}}`,
		"unclosed payload":  `{"payload":{"a":1}`,
		"trailing data":     `{"flow":"f"} x`,
		"trailing comma":    `{"flow":"f",}`,
		"number for string": `{"flow":1}`,
		"not an object":     `[1]`,
		"nothing":           ``,
	}
}

func TestRequest_unmarshalMatchesEncodingJSON(t *testing.T) {
	for name, in := range requestInputs(t) {
		t.Run(name, func(t *testing.T) {
			var want, got Request
			werr := json.Unmarshal([]byte(in), &want)
			gerr := gojson.Unmarshal([]byte(in), &got)
			if (werr == nil) != (gerr == nil) || werr == nil && !reflect.DeepEqual(got, want) { // a request that fails is dropped
				t.Errorf("gojson.Unmarshal(%s) = %+v, %v\nwant %+v, %v", in, got, gerr, want, werr)
			}
		})
	}
}

func FuzzRequest_unmarshal(f *testing.F) {
	for _, in := range requestInputs(f) {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var want, got Request
		werr := json.Unmarshal(in, &want)
		gerr := gojson.Unmarshal(in, &got)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("errors differ: %v, want %v", gerr, werr)
		}
		if werr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("gojson.Unmarshal(%q) = %+v\nwant %+v", in, got, want)
		}
	})
}
