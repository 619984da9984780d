package fuzz

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// written returns the Redis keys whose value changed since the last call,
// volatile keys left out: the keys written (keyspace events) whose DUMP
// differs, or else every key whose DUMP differs.
func (r *runner) written() []string {
	r.t.Helper()
	var written []string
	switch {
	case r.writes != nil:
		// Of the keys written, those whose value is not what it was: a
		// write that puts a key back as it was changes nothing.
		touched, err := r.writes.since()
		if err != nil {
			r.t.Fatalf("fuzz: keyspace events: %v", err)
		}
		touched = slices.DeleteFunc(touched, r.volatile)
		now, err := r.digest(touched)
		if err != nil {
			r.t.Fatalf("fuzz: keys written: %v", err)
		}
		for _, k := range touched {
			if now[k] != r.digests[k] {
				written = append(written, k)
			}
			if d, ok := now[k]; ok {
				r.digests[k] = d
			} else {
				delete(r.digests, k)
			}
		}
	case r.cfg.Redis != nil:
		keys, err := r.keys()
		if err != nil {
			r.t.Fatalf("fuzz: snapshot of the keyspace: %v", err)
		}
		for k, digest := range keys {
			if r.digests[k] != digest {
				written = append(written, k)
			}
		}
		for k := range r.digests {
			if _, ok := keys[k]; !ok {
				written = append(written, k)
			}
		}
		r.digests = keys
	}
	written = slices.DeleteFunc(written, r.volatile)
	slices.Sort(written)
	return written
}

// lists returns the answer of each list route (a paged GET without path
// or required parameters), one line each, and keeps the values and
// objects they show for later requests.
func (r *runner) lists() string {
	r.t.Helper()
	var lines []string
	for _, op := range r.listOps {
		req, err := http.NewRequest(http.MethodGet, r.base+op.path, nil)
		if err != nil {
			r.t.Fatal(err)
		}
		for k, v := range r.cfg.Headers {
			req.Header.Set(k, v)
		}
		res, err := r.do(req)
		if err != nil {
			r.t.Fatalf("fuzz: snapshot of %s: %v", op, err)
		}
		sum := sha256.Sum256(res.Body)
		lines = append(lines, fmt.Sprintf("list %s %d %s", op.path, res.Status, hex.EncodeToString(sum[:8])))
		if res.Status < 300 {
			r.harvest(res.Body)
			var page struct {
				Items []map[string]any `json:"items"`
			}
			if json.Unmarshal(res.Body, &page) == nil && len(page.Items) > 0 {
				r.gen.examples[op.path] = page.Items[:min(len(page.Items), 16)]
			}
		}
	}
	return strings.Join(lines, "\n")
}

// listChanges describes the list answers that differ, or "".
func listChanges(before, after string) string {
	var out []string
	b, a := strings.Split(before, "\n"), strings.Split(after, "\n")
	for i := range a {
		if i < len(b) && a[i] != b[i] {
			out = append(out, "- "+b[i], "+ "+a[i])
		}
	}
	if len(out) == 0 {
		return ""
	}
	return "a list changed: " + strings.Join(out, "; ")
}

// keys returns a digest of the value of every key but the volatile ones.
func (r *runner) keys() (map[string]string, error) {
	ctx := context.Background()
	var keys []string
	collect := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, "*", 1000).Iterator()
		for iter.Next(ctx) {
			if !r.volatile(iter.Val()) {
				keys = append(keys, iter.Val())
			}
		}
		return iter.Err()
	}
	var err error
	switch c := r.cfg.Redis.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, collect)
	case *redis.Client:
		err = collect(ctx, c)
	default:
		err = fmt.Errorf("unsupported Redis client %T", c)
	}
	if err != nil {
		return nil, err
	}
	return r.digest(keys)
}

// digest returns a digest of each key's DUMP; a key that does not exist
// is left out.
func (r *runner) digest(keys []string) (map[string]string, error) {
	ctx := context.Background()
	out := make(map[string]string, len(keys))
	pipe := r.cfg.Redis.Pipeline()
	dumps := make([]*redis.StringCmd, len(keys))
	for i, k := range keys {
		dumps[i] = pipe.Dump(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return nil, err
	}
	for i, k := range keys {
		v, err := dumps[i].Result()
		if err == redis.Nil {
			continue // no such key (deleted, or expired since SCAN)
		}
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256([]byte(v))
		out[k] = hex.EncodeToString(sum[:8])
	}
	return out, nil
}

func (r *runner) volatile(key string) bool {
	for _, pattern := range r.cfg.Volatile {
		if ok, _ := path.Match(pattern, key); ok {
			return true
		}
	}
	return false
}

// writeWatcher follows the keyspace events of one Redis database: the keys
// written by commands (not expirations or evictions, which happen by
// themselves).
type writeWatcher struct {
	rdb     *redis.Client
	sub     *redis.PubSub
	barrier string
	seq     int
}

// watchWrites subscribes to rdb's keyspace events, turning them on (and
// leaving them on: a test's Redis may serve other tests at the same time);
// nil when rdb is no single Redis.
func watchWrites(t testing.TB, rdb redis.UniversalClient) *writeWatcher {
	t.Helper()
	c, ok := rdb.(*redis.Client)
	if !ok {
		return nil
	}
	ctx := context.Background()
	// Turned on, never off: runs in other packages may share the server.
	cur, err := c.ConfigGet(ctx, "notify-keyspace-events").Result()
	if err != nil {
		t.Fatalf("fuzz: keyspace events: %v", err)
	}
	if flags := cur["notify-keyspace-events"]; !strings.Contains(flags, "E") || !strings.Contains(flags, "A") {
		if err := c.ConfigSet(ctx, "notify-keyspace-events", flags+"EA").Err(); err != nil {
			t.Fatalf("fuzz: keyspace events: %v", err)
		}
	}
	w := &writeWatcher{rdb: c, barrier: fmt.Sprintf("fuzz:barrier:%d", time.Now().UnixNano())}
	w.sub = c.PSubscribe(ctx, fmt.Sprintf("__keyevent@%d__:*", c.Options().DB))
	if err := w.sub.Subscribe(ctx, w.barrier); err != nil {
		t.Fatalf("fuzz: keyspace events: %v", err)
	}
	t.Cleanup(func() { _ = w.sub.Close() })
	if _, err := w.since(); err != nil { // the subscriptions confirmed
		t.Fatalf("fuzz: keyspace events: %v", err)
	}
	return w
}

// since returns the keys written since the last call, sorted: it
// publishes a barrier and reads the events up to it.
func (w *writeWatcher) since() ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w.seq++
	marker := strconv.Itoa(w.seq)
	if err := w.rdb.Publish(ctx, w.barrier, marker).Err(); err != nil {
		return nil, err
	}
	var keys []string
	for {
		msg, err := w.sub.ReceiveMessage(ctx)
		if err != nil {
			return nil, err
		}
		if msg.Channel == w.barrier {
			if msg.Payload == marker {
				slices.Sort(keys)
				return slices.Compact(keys), nil
			}
			continue
		}
		event := msg.Channel[strings.LastIndexByte(msg.Channel, ':')+1:]
		if event != "expired" && event != "evicted" {
			keys = append(keys, msg.Payload)
		}
	}
}
