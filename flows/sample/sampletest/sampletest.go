// Package sampletest drives the sample flow in tests: it generates ticks and
// reads the counts the sink keeps.
package sampletest

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/flows/sample"
	"github.com/dropstream/dropstream/stream"
)

// Counts sums the readings counted per sensor over all partitions.
func Counts(ctx context.Context, rdb redis.UniversalClient, partitions int) (map[string]int64, error) {
	readings := sample.NewTopics(partitions).Readings
	out := map[string]int64{}
	for p := 0; p < partitions; p++ {
		m, err := rdb.HGetAll(ctx, sample.CountsKey(readings.HashTag(p))).Result()
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
	ticks := sample.NewTopics(partitions).Ticks
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
			body, _ := json.Marshal(sample.Tick{Run: run, Seq: seq, Sensor: sensor, At: time.Now().UTC()})
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
