package history

import (
	"testing"
	"time"

	"github.com/dropstream/dropstream/notifier/internal/jsontest"
)

func TestRecord_marshalMatchesEncodingJSON(t *testing.T) {
	at := time.Date(2026, 11, 29, 1, 2, 3, 456789000, time.UTC)
	zone := time.FixedZone("x", -(3*3600 + 30*60))
	full := Record{ID: "n_1", Flow: "f", Event: "e", SubscriberID: "s", DestinationID: "d", Channel: "webhook", Subject: "a<b>&\"c\"\n",
		Window: "w\u2028", Status: StatusSent, Attempts: 3, Critical: true, ObservedAt: at.In(zone), At: at, LatencyMs: 12,
		TraceID: "t", EventID: "ev", RunID: "r", MessageID: "1-0", Error: "bad \xff byte"}
	jsontest.EveryFieldSet(t, full)
	jsontest.MatchesEncodingJSON(t, map[string]Record{
		"full":      full,
		"zero":      {},
		"sparse":    {ID: "n_2", SubscriberID: "s", Status: StatusFailed, At: at},
		"non-ascii": {ID: "n_3", Subject: "café ☕", At: at.Add(time.Nanosecond)},
	})
}
