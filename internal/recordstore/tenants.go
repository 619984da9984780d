package recordstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/internal/script"
	"github.com/dropstream/dropstream/internal/tenancy"
)

// base is the key the tenant keys derive from, sharing its hash tag.
func (s *Store[T]) base() string {
	b := cmp.Or(s.cfg.Layout.Hash, s.cfg.Layout.Index)
	if open := strings.IndexByte(b, '{'); open < 0 || !strings.Contains(b[open:], "}") {
		// A key without a hash tag: tagged with itself, the derived keys
		// share its slot.
		b = "{" + b + "}"
	}
	return b
}

// OwnersKey returns the key of the hash of each record's tenant (id →
// tenant), for callers whose own scripts write records.
func (s *Store[T]) OwnersKey() string { return s.base() + ":owner" }

// TenantIndex returns the key of the sorted set of a tenant's ids (all
// scored 0), for callers whose own scripts write records.
func (s *Store[T]) TenantIndex(tenant string) string {
	return s.base() + ":tenant:" + tenancy.Of(tenant)
}

// tenantOf returns rec's tenant (tenancy.Open without Config.Tenant).
func (s *Store[T]) tenantOf(rec T) string {
	if s.cfg.Tenant == nil {
		return tenancy.Open
	}
	return tenancy.Of(s.cfg.Tenant(rec))
}

// GetIn returns the record of id when v sees its tenant, or an error
// wrapping ErrNotFound: another tenant's record is not there for v.
func (s *Store[T]) GetIn(ctx context.Context, v tenancy.View, id string) (T, error) {
	return s.GetInWith(ctx, v, id, nil)
}

// GetInWith is GetIn with the commands queue adds (when not nil) sent in
// the same pipeline; their replies are the caller's to read.
func (s *Store[T]) GetInWith(ctx context.Context, v tenancy.View, id string, queue func(redis.Pipeliner)) (T, error) {
	pipe := s.rdb.Pipeline()
	cmd := s.get(ctx, pipe, id)
	if queue != nil {
		queue(pipe)
	}
	_, _ = pipe.Exec(ctx) // each reply's error is read on its own
	rec, err := s.decode(id, cmd)
	if err == nil && !v.Sees(s.tenantOf(rec)) {
		var zero T
		return zero, fmt.Errorf("%w: %q", ErrNotFound, clip.Marked(id, maxIDBytes))
	}
	return rec, err
}

// ListIn is List over the records v sees: all, or its tenant's through
// the tenant's own index.
func (s *Store[T]) ListIn(ctx context.Context, v tenancy.View, cursor string, limit int) (Page[T], error) {
	if v.All || s.cfg.Tenant == nil {
		return s.List(ctx, cursor, limit)
	}
	tenant := v.Owner()
	return s.list(ctx, s.TenantIndex(tenant), func(rec T) bool { return s.tenantOf(rec) == tenant }, cursor, limit)
}

// deleteScript removes a record of the expected tenant. KEYS: record key
// (or hash), owners hash, tenant's index[, index]. ARGV: id, tenant,
// "hash" or "keys", tenancy.Open. Returns 0 or 1 removed, -1 another's.
var deleteScript = script.New(`
local owner = redis.call('HGET', KEYS[2], ARGV[1]) or ARGV[4]
if owner ~= ARGV[2] then return -1 end
local n
if ARGV[3] == 'hash' then
  n = redis.call('HDEL', KEYS[1], ARGV[1])
else
  n = redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[4], ARGV[1])
end
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
return n`)

// DeleteIn removes the record of id when v sees its tenant, or returns an
// error wrapping ErrNotFound (none, or another tenant's).
func (s *Store[T]) DeleteIn(ctx context.Context, v tenancy.View, id string) error {
	if s.cfg.Tenant == nil {
		return s.deleteUntenanted(ctx, id)
	}
	for range maxTries {
		owner, err := s.rdb.HGet(ctx, s.OwnersKey(), id).Result()
		if errors.Is(err, redis.Nil) {
			owner, err = tenancy.Open, nil
		}
		if err != nil {
			return fmt.Errorf("recordstore: delete %q: %w", clip.Marked(id, maxIDBytes), err)
		}
		if !v.Sees(owner) {
			return fmt.Errorf("%w: %q", ErrNotFound, clip.Marked(id, maxIDBytes))
		}
		keys, layout := []string{s.Key(id), s.OwnersKey(), s.TenantIndex(owner)}, "hash"
		if s.cfg.Layout.Hash == "" {
			keys, layout = append(keys, s.cfg.Layout.Index), "keys"
		}
		n, err := deleteScript.Run(ctx, s.rdb, keys, id, owner, layout, tenancy.Open).Int()
		switch {
		case err != nil:
			return fmt.Errorf("recordstore: delete %q: %w", clip.Marked(id, maxIDBytes), err)
		case n == -1:
			continue // deleted and stored again by another tenant meanwhile
		case n == 0:
			return fmt.Errorf("%w: %q", ErrNotFound, clip.Marked(id, maxIDBytes))
		}
		return nil
	}
	return fmt.Errorf("%w: delete %q", ErrConflict, clip.Marked(id, maxIDBytes))
}

// deleteUntenanted is DeleteIn of a store without tenants.
func (s *Store[T]) deleteUntenanted(ctx context.Context, id string) error {
	var del *redis.IntCmd
	var err error
	if s.cfg.Layout.Hash != "" {
		del = s.rdb.HDel(ctx, s.cfg.Layout.Hash, id)
		err = del.Err()
	} else {
		_, err = s.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			del = pipe.Del(ctx, s.Key(id))
			pipe.ZRem(ctx, s.cfg.Layout.Index, id)
			return nil
		})
	}
	if err != nil {
		return fmt.Errorf("recordstore: delete %q: %w", clip.Marked(id, maxIDBytes), err)
	}
	if del.Val() == 0 {
		return fmt.Errorf("%w: %q", ErrNotFound, clip.Marked(id, maxIDBytes))
	}
	return nil
}

// UpdateIn is Update of a record v sees; another tenant's record is
// ErrNotFound. fn must not change the record's tenant.
func (s *Store[T]) UpdateIn(ctx context.Context, v tenancy.View, id string, fn func(*T) error) (T, error) {
	return s.UpdateAlso(ctx, v, id, fn, nil)
}

// UpdateAlso is UpdateIn whose transaction also queues also(pipe, old,
// new): writes of keys in the record's slot that follow it, such as
// indexes.
func (s *Store[T]) UpdateAlso(ctx context.Context, v tenancy.View, id string, fn func(*T) error, also func(pipe redis.Pipeliner, old, rec T)) (T, error) {
	return s.update(ctx, id, func(rec *T) error {
		before := s.tenantOf(*rec)
		if !v.Sees(before) {
			return fmt.Errorf("%w: %q", ErrNotFound, clip.Marked(id, maxIDBytes))
		}
		if err := fn(rec); err != nil {
			return err
		}
		if s.tenantOf(*rec) != before {
			return fmt.Errorf("recordstore: update %q changes its tenant", clip.Marked(id, maxIDBytes))
		}
		return nil
	}, also)
}
