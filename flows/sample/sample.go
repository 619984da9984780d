// Package sample is the smallest flow, kept as the example of the flow
// contract (package flow): a generator publishes sensor ticks, the
// "sample-enrich" stage turns each tick into a reading, and the
// "sample-sink" stage counts readings per sensor, once per tick, through the
// idempotency ledger.
package sample

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/rediskey"
	"github.com/dropstream/dropstream/stream"
)

// Name is the flow's name: the flow of its topics, the prefix of its
// stages.
const Name = "sample"

// Tick is what the generator publishes.
type Tick struct {
	// Run identifies the generator run; Run and Seq identify the tick.
	Run    string    `json:"run"`
	Seq    int64     `json:"seq"`
	Sensor string    `json:"sensor"`
	At     time.Time `json:"at"`
}

// Reading is what sample-enrich publishes for each tick.
type Reading struct {
	Run    string  `json:"run"`
	Seq    int64   `json:"seq"`
	Sensor string  `json:"sensor"`
	Value  float64 `json:"value"`
}

// Topics are the flow's topics.
type Topics struct {
	// Ticks carries Tick, published by Generate.
	Ticks stream.Topic
	// Readings carries Reading, published by sample-enrich.
	Readings stream.Topic
}

// NewTopics returns the flow's topics with the given partition count.
func NewTopics(partitions int) Topics {
	return Topics{Ticks: stream.NewTopic(Name, "ticks", partitions), Readings: stream.NewTopic(Name, "readings", partitions)}
}

// stages returns the flow's stages.
func stages(rdb redis.UniversalClient, pub *stream.Publisher, topics Topics) ([]stream.Stage, error) {
	readings := topics.Readings
	ledger, err := stream.NewLedger(rdb, stream.LedgerConfig{Name: "sample-sink", TTL: 24 * time.Hour})
	if err != nil {
		return nil, err
	}
	count := stream.NewEffect(`return redis.call('HINCRBY', KEYS[1], ARGV[1], 1)`)
	enrich := func(ctx context.Context, m *stream.Message) error {
		var t Tick
		if err := json.Unmarshal(m.Payload, &t); err != nil {
			return stream.Permanentf("decode tick: %w", err)
		}
		r := Reading{Run: t.Run, Seq: t.Seq, Sensor: t.Sensor, Value: float64(t.Seq%100) / 10}
		body, _ := json.Marshal(r)
		return pub.Publish(ctx, readings, stream.NewMessage(t.Sensor, "sample.reading", body))
	}
	sink := func(ctx context.Context, m *stream.Message) error {
		var r Reading
		if err := json.Unmarshal(m.Payload, &r); err != nil {
			return stream.Permanentf("decode reading: %w", err)
		}
		tag := readings.HashTag(m.Partition)
		_, _, err := ledger.Apply(ctx, count, ledger.Key(tag, r.Run+":"+strconv.FormatInt(r.Seq, 10)),
			[]string{CountsKey(tag)}, r.Sensor)
		return err
	}
	return []stream.Stage{
		{Name: StageEnrich, Topic: topics.Ticks, Handler: enrich},
		{Name: StageSink, Topic: readings, Handler: sink},
	}, nil
}

// CountsKey is the hash of readings per sensor of one partition.
func CountsKey(hashTag string) string { return rediskey.Key(hashTag, "sample", "counts") }

// Counts sums the readings counted per sensor over all partitions.
func Counts(ctx context.Context, rdb redis.UniversalClient, partitions int) (map[string]int64, error) {
	readings := NewTopics(partitions).Readings
	out := map[string]int64{}
	for p := 0; p < partitions; p++ {
		m, err := rdb.HGetAll(ctx, CountsKey(readings.HashTag(p))).Result()
		if err != nil {
			return nil, fmt.Errorf("sample counts: %w", err)
		}
		for k, v := range m {
			n, _ := strconv.ParseInt(v, 10, 64)
			out[k] += n
		}
	}
	return out, nil
}

// Generate publishes rate ticks per second over sensors until ctx ends or
// limit ticks (when limit > 0) are out, and returns how many it published.
// Each call is a new run: its ticks are counted even when an earlier run
// used the same sequence numbers.
// progress, when not nil, is called with the running total after each
// publish.
func Generate(ctx context.Context, pub *stream.Publisher, partitions, rate, sensors int, limit int64, progress func(int64)) (int64, error) {
	ticks := NewTopics(partitions).Ticks
	if rate < 1 || sensors < 1 {
		return 0, fmt.Errorf("sample generator: rate %d and sensors %d must be positive", rate, sensors)
	}
	perTick := max(1, rate/10)
	interval := time.Duration(float64(time.Second) * float64(perTick) / float64(rate))
	t := time.NewTicker(interval)
	defer t.Stop()
	var seq int64
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	for {
		msgs := make([]*stream.Message, 0, perTick)
		for i := 0; i < perTick && (limit <= 0 || seq < limit); i++ {
			sensor := "sensor-" + strconv.Itoa(int(seq)%sensors)
			body, _ := json.Marshal(Tick{Run: run, Seq: seq, Sensor: sensor, At: time.Now().UTC()})
			msgs = append(msgs, stream.NewMessage(sensor, "sample.tick", body))
			seq++
		}
		if err := pub.Publish(ctx, ticks, msgs...); err != nil {
			if ctx.Err() != nil {
				return seq - int64(len(msgs)), nil
			}
			return seq - int64(len(msgs)), err
		}
		if progress != nil {
			progress(seq)
		}
		if limit > 0 && seq >= limit {
			return seq, nil
		}
		select {
		case <-ctx.Done():
			return seq, nil
		case <-t.C:
		}
	}
}
