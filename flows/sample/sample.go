// Package sample is the smallest flow, the example of the flow contract
// (package flow): "sample-enrich" turns each sensor tick into a reading and
// "sample-sink" counts readings per sensor, once per tick, through the
// idempotency ledger. Package sampletest publishes ticks.
package sample

import (
	"context"
	"encoding/json"
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
