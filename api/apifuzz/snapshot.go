package apifuzz

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

// snapshot returns the stored state a refused request must leave alone:
// a digest of each Redis key (its DUMP) but the volatile ones, and the
// body of each list route (a paged GET without path or required
// parameters), one line each, sorted.
func (r *runner) snapshot() string {
	r.t.Helper()
	var lines []string
	if r.cfg.Redis != nil {
		keys, err := r.keys()
		if err != nil {
			r.t.Fatalf("apifuzz: snapshot of the keyspace: %v", err)
		}
		for k, digest := range keys {
			lines = append(lines, "redis "+k+" "+digest)
		}
	}
	for _, op := range r.lists {
		req, err := http.NewRequest(http.MethodGet, r.base+op.path, nil)
		if err != nil {
			r.t.Fatal(err)
		}
		for k, v := range r.cfg.Headers {
			req.Header.Set(k, v)
		}
		res, err := r.do(req)
		if err != nil {
			r.t.Fatalf("apifuzz: snapshot of %s: %v", op, err)
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
	slices.Sort(lines)
	return strings.Join(lines, "\n")
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
			continue // expired between SCAN and DUMP
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

// diff names the lines that differ between two snapshots, a few of them.
func diff(before, after string) string {
	b, a := strings.Split(before, "\n"), strings.Split(after, "\n")
	var out []string
	for _, l := range a {
		if !slices.Contains(b, l) {
			out = append(out, "+ "+l)
		}
	}
	for _, l := range b {
		if !slices.Contains(a, l) {
			out = append(out, "- "+l)
		}
	}
	if len(out) > 8 {
		out = append(out[:8], fmt.Sprintf("… %d more", len(out)-8))
	}
	return "stored state changed: " + strings.Join(out, "; ")
}
