package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

// soakFamily is the keys of one family (a key name with its ids and
// partitions replaced by *) and what they hold.
type soakFamily struct {
	Name string
	Type string
	// Keys is how many; Elements the sum of their lengths (a string's
	// bytes, a hash's fields, a stream's entries, …); NoTTL how many
	// never expire.
	Keys, Elements, NoTTL int64
}

var (
	soakTagRE = regexp.MustCompile(`\{([a-z-]+)\.\d+\}`)
	soakIDRE  = regexp.MustCompile(`(^|:)[^:{}]*[0-9][^:{}]*`)
)

// soakLengths is the length command of each type: a string's bytes, a
// hash's fields, a stream's entries, …
var soakLengths = map[string]func(redis.Pipeliner, context.Context, string) *redis.IntCmd{
	"string": redis.Pipeliner.StrLen, "hash": redis.Pipeliner.HLen, "zset": redis.Pipeliner.ZCard,
	"set": redis.Pipeliner.SCard, "list": redis.Pipeliner.LLen, "stream": redis.Pipeliner.XLen,
}

// soakBatch is how many keys one pipeline of soakFamilies asks about.
const soakBatch = 500

// soakFamilyOf is the family of key: "ds:{avail.3}:entity:v1:42" is
// "ds:{avail.*}:entity:*:*". A part with a digit is an id.
func soakFamilyOf(key string) string {
	f := soakTagRE.ReplaceAllString(key, "{$1.*}")
	return soakIDRE.ReplaceAllString(f, "$1*")
}

// soakFamilies counts the keys of rdb by family, largest first.
func soakFamilies(ctx context.Context, rdb *redis.Client) ([]soakFamily, error) {
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	types := make([]*redis.StatusCmd, len(keys))
	ttls := make([]*redis.DurationCmd, len(keys))
	lens := make([]*redis.IntCmd, len(keys))
	// In batches: a pipeline of every key outlasts the client's timeouts
	// on a busy embedded Redis.
	for lo := 0; lo < len(keys); lo += soakBatch {
		batch := keys[lo:min(lo+soakBatch, len(keys))]
		if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, k := range batch {
				types[lo+i], ttls[lo+i] = p.Type(ctx, k), p.PTTL(ctx, k)
			}
			return nil
		}); err != nil {
			return nil, fmt.Errorf("types: %w", err)
		}
		if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, k := range batch {
				if l := soakLengths[types[lo+i].Val()]; l != nil {
					lens[lo+i] = l(p, ctx, k)
				}
			}
			return nil
		}); err != nil {
			return nil, fmt.Errorf("lengths: %w", err)
		}
	}
	fams := map[string]*soakFamily{}
	for i, k := range keys {
		name := soakFamilyOf(k)
		f := fams[name]
		if f == nil {
			f = &soakFamily{Name: name, Type: types[i].Val()}
			fams[name] = f
		}
		f.Keys++
		if lens[i] != nil {
			f.Elements += lens[i].Val()
		}
		if ttls[i].Val() < 0 { // -1: no TTL (-2, gone since KEYS, counts too: rare)
			f.NoTTL++
		}
	}
	out := slices.Collect(maps.Values(fams))
	slices.SortFunc(out, func(a, b *soakFamily) int {
		if a.Elements != b.Elements {
			return int(b.Elements - a.Elements)
		}
		return strings.Compare(a.Name, b.Name)
	})
	res := make([]soakFamily, len(out))
	for i, f := range out {
		res[i] = *f
	}
	return res, nil
}

// writeSoakFamilies writes the families as a table, one a line.
func writeSoakFamilies(w io.Writer, fams []soakFamily) error {
	for _, f := range fams {
		if _, err := fmt.Fprintf(w, "%8d keys %10d elements %8d no-ttl  %-6s %s\n", f.Keys, f.Elements, f.NoTTL, f.Type, f.Name); err != nil {
			return err
		}
	}
	return nil
}

// saveFamilies writes the families of the process's Redis to path.
func (p *soakProc) saveFamilies(ctx context.Context, path string) {
	p.save(path, "key families", func(w io.Writer) error {
		fams, err := soakFamilies(ctx, p.rdb)
		if err != nil {
			return err
		}
		return writeSoakFamilies(w, fams)
	})
}
