package notifier

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/dropstream/dropstream/notifier/internal/jsontest"
)

func TestDeliveryRecord_marshalMatchesEncodingJSON(t *testing.T) {
	at := time.Date(2026, 11, 29, 1, 2, 3, 456789000, time.UTC)
	full := DeliveryRecord{State: DeliveryRejected, Flow: "f", Channel: "webhook", RecipientID: "s", EventID: "n_1", SessionID: "x",
		Subject: "a<b>&\"c\"", TraceID: "t", MessageID: "1-0", Attempt: 2, Token: "tok", StartedAt: at,
		SentAt: at.In(time.FixedZone("", 3600)), Error: "bad \xff\n"}
	jsontest.EveryFieldSet(t, full)
	jsontest.MatchesEncodingJSON(t, map[string]DeliveryRecord{
		"full": full,
		"zero": {},
		"claim": {State: DeliverySending, Flow: "f", Channel: "webhook", RecipientID: "s", EventID: "n_1",
			MessageID: "1-0", Attempt: 1, Token: "tok", StartedAt: at},
	})
}

func TestMessage_marshalMatchesEncodingJSON(t *testing.T) {
	at := time.Date(2026, 11, 29, 1, 2, 3, 0, time.FixedZone("", -7200))
	full := Message{ID: "n_1", Flow: "f", Event: "e", Subject: "<s>", SubscriberID: "s", DestinationID: "d", Window: "w",
		Critical: true, Digest: true, Title: "T\u2028", Text: "line\nline", Payload: json.RawMessage(` {"a": [1, "<&>"]} `),
		ObservedAt: at, TraceID: "t", UnsubscribeURL: "http://x/v1/unsubscribe/tok?a=1&b=2"}
	jsontest.EveryFieldSet(t, full)
	jsontest.MatchesEncodingJSON(t, map[string]Message{
		"full":            full,
		"zero":            {},
		"compact payload": {ID: "n_2", Payload: json.RawMessage(`{"i":1}`)},
	})
}
