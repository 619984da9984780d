package sample_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/flows/sample"
	"github.com/dropstream/dropstream/flows/sample/sampletest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

func newRedis(t *testing.T) *redis.Client {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// entries returns every entry of every partition of topic as messages,
// partition by partition, as a runner would deliver them.
func entries(t *testing.T, rdb redis.UniversalClient, topic stream.Topic) []*stream.Message {
	t.Helper()
	var out []*stream.Message
	for p := 0; p < topic.Partitions; p++ {
		xs, err := rdb.XRange(context.Background(), topic.Stream(p), "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range xs {
			m := &stream.Message{ID: x.ID, Stream: topic.Stream(p), Partition: p, Attempt: 1}
			m.Key, _ = x.Values["key"].(string)
			m.Type, _ = x.Values["type"].(string)
			payload, _ := x.Values["payload"].(string)
			m.Payload = []byte(payload)
			out = append(out, m)
		}
	}
	return out
}

func total(t *testing.T, rdb redis.UniversalClient, partitions int) (int64, map[string]int64) {
	t.Helper()
	counts, err := sampletest.Counts(context.Background(), rdb, partitions)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, c := range counts {
		n += c
	}
	return n, counts
}

func stagesByName(t *testing.T, rdb redis.UniversalClient, partitions int) map[string]stream.Stage {
	t.Helper()
	f, err := sample.New(context.Background(), flow.Deps{Redis: rdb, Publisher: stream.NewPublisher(rdb, stream.Telemetry{}),
		Settings: flow.Settings{Partitions: partitions}})
	if err != nil {
		t.Fatal(err)
	}
	stages := f.Describe().Stages
	out := map[string]stream.Stage{}
	for _, s := range stages {
		out[s.Name] = s
	}
	if len(out) != 2 || out["sample-enrich"].Handler == nil || out["sample-sink"].Handler == nil {
		t.Fatalf("Stages = %v, want sample-enrich and sample-sink", stages)
	}
	return out
}

func TestGenerate_limitPublishesExactlyThatMany(t *testing.T) {
	tests := []struct {
		partitions, rate, sensors int
		limit                     int64
		publishes                 int // progress calls: one per publish of rate/10 ticks
	}{
		{partitions: 4, rate: 100000, sensors: 7, limit: 50, publishes: 1},
		{partitions: 1, rate: 100000, sensors: 3, limit: 1, publishes: 1},
		{partitions: 8, rate: 200, sensors: 10, limit: 45, publishes: 3},
		{partitions: 2, rate: 5, sensors: 2, limit: 3, publishes: 3},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d partitions, rate %d, %d sensors, limit %d", tt.partitions, tt.rate, tt.sensors, tt.limit), func(t *testing.T) {
			rdb := newRedis(t)
			var progress []int64
			n, err := sampletest.Generate(context.Background(), stream.NewPublisher(rdb, stream.Telemetry{}),
				tt.partitions, tt.rate, tt.sensors, tt.limit, func(n int64) { progress = append(progress, n) })
			if err != nil || n != tt.limit {
				t.Fatalf("Generate = %d, %v; want %d, nil", n, err, tt.limit)
			}
			if len(progress) != tt.publishes || progress[len(progress)-1] != tt.limit {
				t.Errorf("progress calls %v, want %d ending at %d", progress, tt.publishes, tt.limit)
			}
			topics := sample.NewTopics(tt.partitions)
			ticks, _ := topics.Ticks, topics.Readings
			msgs := entries(t, rdb, ticks)
			if int64(len(msgs)) != tt.limit {
				t.Fatalf("%d ticks in the streams, want %d", len(msgs), tt.limit)
			}
			seqs := map[int64]bool{}
			perSensor := map[string]int64{}
			for _, m := range msgs {
				var tick sample.Tick
				if err := json.Unmarshal(m.Payload, &tick); err != nil {
					t.Fatalf("tick %s: %v", m.ID, err)
				}
				if seqs[tick.Seq] || tick.Seq < 0 || tick.Seq >= tt.limit {
					t.Errorf("seq %d duplicated or out of 0..%d", tick.Seq, tt.limit-1)
				}
				seqs[tick.Seq] = true
				perSensor[tick.Sensor]++
				if want := fmt.Sprintf("sensor-%d", tick.Seq%int64(tt.sensors)); tick.Sensor != want {
					t.Errorf("tick %d has sensor %q, want %q", tick.Seq, tick.Sensor, want)
				}
				if m.Key != tick.Sensor || m.Type != "sample.tick" || m.Partition != ticks.Partition(tick.Sensor) || tick.At.IsZero() {
					t.Errorf("tick %d published as key %q type %q partition %d at %v, want its sensor's key and partition",
						tick.Seq, m.Key, m.Type, m.Partition, tick.At)
				}
			}
			for i := 0; i < tt.sensors; i++ {
				// Round robin: sensor i gets ceil((limit-i)/sensors) ticks.
				want := max(0, (tt.limit-int64(i)+int64(tt.sensors)-1)/int64(tt.sensors))
				if got := perSensor[fmt.Sprintf("sensor-%d", i)]; got != want {
					t.Errorf("sensor-%d has %d ticks, want %d", i, got, want)
				}
			}
		})
	}
}

func TestGenerate_rejectsNonPositiveRateOrSensors(t *testing.T) {
	rdb := newRedis(t)
	pub := stream.NewPublisher(rdb, stream.Telemetry{})
	for _, tt := range []struct{ rate, sensors int }{{0, 10}, {-1, 10}, {10, 0}, {10, -5}} {
		n, err := sampletest.Generate(context.Background(), pub, 2, tt.rate, tt.sensors, 10, nil)
		if err == nil || n != 0 {
			t.Errorf("Generate(rate %d, sensors %d) = %d, %v; want 0 and an error", tt.rate, tt.sensors, n, err)
		}
	}
}

func TestGenerate_stopsWhenContextEndsAndReportsWhatItPublished(t *testing.T) {
	rdb := newRedis(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n, err := sampletest.Generate(ctx, stream.NewPublisher(rdb, stream.Telemetry{}), 3, 1000, 5, 0, func(n int64) {
		if n >= 300 {
			cancel()
		}
	})
	if err != nil || n < 300 {
		t.Fatalf("Generate = %d, %v; want at least 300 and nil", n, err)
	}
	topics := sample.NewTopics(3)
	ticks, _ := topics.Ticks, topics.Readings
	if got := int64(len(entries(t, rdb, ticks))); got != n {
		t.Errorf("Generate reported %d ticks, the streams hold %d", n, got)
	}
}

func TestStages_enrichAndSinkCountEachTickOnceThroughRunners(t *testing.T) {
	const partitions = 2
	rdb := newRedis(t)
	stages := stagesByName(t, rdb, partitions)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("runners did not stop within 10s")
		}
	})
	for _, s := range stages {
		s.Config.Block = 50 * time.Millisecond // quick shutdown
		r, err := stream.NewRunner(rdb, s, stream.Telemetry{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if err := r.Run(ctx); err != nil {
				t.Errorf("runner %s: %v", s.Name, err)
			}
		})
	}
	if n, err := sampletest.Generate(ctx, stream.NewPublisher(rdb, stream.Telemetry{}), partitions, 100000, 10, 200, nil); err != nil || n != 200 {
		t.Fatalf("Generate = %d, %v", n, err)
	}
	testenv.WaitFor(t, 20*time.Second, func() bool {
		n, _ := total(t, rdb, partitions)
		return n == 200
	}, "200 ticks counted")
	topics := sample.NewTopics(partitions)
	_, readings := topics.Ticks, topics.Readings
	published := entries(t, rdb, readings)
	if got := len(published); got != 200 {
		t.Fatalf("%d readings published, want one per tick (200)", got)
	}
	var first sample.Reading
	if err := json.Unmarshal(published[0].Payload, &first); err != nil || first.Run == "" {
		t.Fatalf("reading %s has no generator run: %v", published[0].Payload, err)
	}
	run := first.Run
	_, counts := total(t, rdb, partitions)
	for i := 0; i < 10; i++ {
		if c := counts[fmt.Sprintf("sensor-%d", i)]; c != 20 {
			t.Errorf("sensor-%d counted %d, want 20", i, c)
		}
	}

	// The sink handler called twice with the same message (a redelivery)
	// counts it once; a reading the runner already counted is not counted
	// again.
	sink := stages["sample-sink"].Handler
	reading := func(seq int64) *stream.Message {
		sensor := fmt.Sprintf("sensor-%d", seq%10)
		body, _ := json.Marshal(sample.Reading{Run: run, Seq: seq, Sensor: sensor, Value: 1})
		m := stream.NewMessage(sensor, "sample.reading", body)
		m.Partition = readings.Partition(sensor)
		m.Stream = readings.Stream(m.Partition)
		m.ID, m.Attempt = "1-1", 1
		return m
	}
	for _, tt := range []struct {
		seq  int64
		want int64 // sensor-3's count after two calls
	}{{1003, 21}, {3, 21}} {
		m := reading(tt.seq)
		for call := 1; call <= 2; call++ {
			if err := sink(ctx, m); err != nil {
				t.Fatalf("sink(seq %d) call %d: %v", tt.seq, call, err)
			}
		}
		if _, counts := total(t, rdb, partitions); counts["sensor-3"] != tt.want {
			t.Errorf("after two sink calls with seq %d, sensor-3 counted %d, want %d", tt.seq, counts["sensor-3"], tt.want)
		}
	}
}

func TestStages_malformedPayloadIsPermanent(t *testing.T) {
	const partitions = 2
	rdb := newRedis(t)
	stages := stagesByName(t, rdb, partitions)
	tests := []struct {
		stage, payload string
	}{
		{"sample-enrich", "not json"},
		{"sample-enrich", ""},
		{"sample-enrich", `{"seq":"one"}`},
		{"sample-sink", "not json"},
		{"sample-sink", `[1,2]`},
		{"sample-sink", `{"seq":1,"sensor":7}`},
	}
	for _, tt := range tests {
		t.Run(tt.stage+" "+tt.payload, func(t *testing.T) {
			m := stream.NewMessage("sensor-1", "x", []byte(tt.payload))
			m.ID, m.Attempt = "1-1", 1
			err := stages[tt.stage].Handler(context.Background(), m)
			if !stream.IsPermanent(err) {
				t.Fatalf("%s(%q) = %v, want a permanent error", tt.stage, tt.payload, err)
			}
			if stream.Classify(err) != stream.OutcomeDeadLettered {
				t.Errorf("Classify(%v) = %s, want dead-lettered", err, stream.Classify(err))
			}
		})
	}
	topics := sample.NewTopics(partitions)
	_, readings := topics.Ticks, topics.Readings
	if got := len(entries(t, rdb, readings)); got != 0 {
		t.Errorf("malformed ticks published %d readings, want 0", got)
	}
	if n, counts := total(t, rdb, partitions); n != 0 {
		t.Errorf("malformed readings were counted: %v", counts)
	}
}

// process runs handler on every entry of topic not yet in done.
func process(t *testing.T, rdb redis.UniversalClient, topic stream.Topic, handler stream.Handler, done map[string]bool) {
	t.Helper()
	for _, m := range entries(t, rdb, topic) {
		if done[m.Stream+"/"+m.ID] {
			continue
		}
		if err := handler(context.Background(), m); err != nil {
			t.Fatalf("%s %s: %v", topic, m.ID, err)
		}
		done[m.Stream+"/"+m.ID] = true
	}
}

// Every tick is counted once. A second run of the generator (the demo
// restarted against a persistent Redis, or a second Generate call) publishes
// new ticks, yet they restart at Seq 0, and the sink keys its ledger by Seq:
// the new readings are taken for redeliveries and silently not counted (for
// the ledger's 24h TTL).
func TestStages_secondGeneratorRunIsCounted(t *testing.T) {
	const partitions = 2
	rdb := newRedis(t)
	stages := stagesByName(t, rdb, partitions)
	topics := sample.NewTopics(partitions)
	ticks, readings := topics.Ticks, topics.Readings
	pub := stream.NewPublisher(rdb, stream.Telemetry{})
	done := map[string]bool{}
	for run := 1; run <= 2; run++ {
		if n, err := sampletest.Generate(context.Background(), pub, partitions, 100000, 5, 20, nil); err != nil || n != 20 {
			t.Fatalf("Generate run %d = %d, %v", run, n, err)
		}
		process(t, rdb, ticks, stages["sample-enrich"].Handler, done)
		process(t, rdb, readings, stages["sample-sink"].Handler, done)
		if got, want := len(entries(t, rdb, readings)), 20*run; got != want {
			t.Fatalf("after run %d: %d readings, want %d", run, got, want)
		}
		if n, counts := total(t, rdb, partitions); n != int64(20*run) {
			t.Errorf("after generator run %d: %d ticks counted, want %d (%v)", run, n, 20*run, counts)
		}
	}
}
