package flow

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

func TestRecent_newestFirstOverPartitions(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			rdb := b.Client(t)
			topic := stream.NewTopic("ev", "things", 2)
			add := func(p int, id, payload string) {
				if err := rdb.XAdd(t.Context(), &redis.XAddArgs{Stream: topic.Stream(p), ID: id,
					Values: []any{"type", "thing", "payload", payload, "traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}).Err(); err != nil {
					t.Fatal(err)
				}
			}
			add(0, "1000-0", "a")
			add(1, "2000-0", "b")
			add(0, "3000-0", "c")
			got, err := Recent(t.Context(), rdb, topic, 2)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 2 || string(got[0].Payload) != "c" || string(got[1].Payload) != "b" || got[0].Time().UnixMilli() != 3000 {
				t.Fatalf("recent %+v, want c then b", got)
			}
			if TraceIDOf(got[0].TraceParent) != "0af7651916cd43dd8448eb211c80319c" || got[0].Type != "thing" {
				t.Errorf("entry %+v: want its type and trace id", got[0])
			}
		})
	}
}

func TestTraceIDOf_rejectsMalformed(t *testing.T) {
	for _, tp := range []string{"", "00-abc-def-01", "garbage"} {
		if got := TraceIDOf(tp); got != "" {
			t.Errorf("TraceIDOf(%q) = %q, want empty", tp, got)
		}
	}
}
