package subscriber

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// TokenInfo is what a token names.
type TokenInfo struct {
	Purpose     string
	Subscriber  Subscriber
	Destination Destination
}

// Peek returns what a token names without using it, without secrets.
// Errors wrap ErrTokenNotFound.
func (st *Store) Peek(ctx context.Context, token string) (TokenInfo, error) {
	info, err := st.lookup(ctx, token)
	info.Subscriber = info.Subscriber.public()
	info.Destination.Secret, info.Destination.UnsubscribeToken = "", ""
	return info, err
}

func (st *Store) lookup(ctx context.Context, token string) (TokenInfo, error) {
	if len(token) != 64 || !isHex(token) {
		return TokenInfo{}, ErrTokenNotFound
	}
	v, err := st.rdb.Get(ctx, tokenKey(token)).Result()
	if errors.Is(err, redis.Nil) {
		return TokenInfo{}, ErrTokenNotFound
	}
	if err != nil {
		return TokenInfo{}, fmt.Errorf("subscriber: token: %w", err)
	}
	parts := strings.Split(v, "|")
	if len(parts) != 3 {
		return TokenInfo{}, ErrTokenNotFound
	}
	s, err := st.Resolve(ctx, parts[1])
	if errors.Is(err, ErrNotFound) {
		return TokenInfo{}, ErrTokenNotFound
	}
	if err != nil {
		return TokenInfo{}, err
	}
	d, ok := s.Destination(parts[2])
	if !ok {
		return TokenInfo{}, ErrTokenNotFound
	}
	return TokenInfo{Purpose: parts[0], Subscriber: s, Destination: d}, nil
}

// Confirm uses an opt-in token, activating its destination with an
// unsubscribe token; it returns the subscriber (secrets included) and the
// destination. Errors wrap ErrTokenNotFound.
func (st *Store) Confirm(ctx context.Context, token string) (Subscriber, Destination, error) {
	unsub := randomHex(32)
	var s Subscriber
	var d Destination
	err := st.update(ctx, token, PurposeConfirm, func(pipe redis.Pipeliner, info TokenInfo) error {
		s = info.Subscriber
		for i := range s.Destinations {
			if s.Destinations[i].ID == info.Destination.ID {
				x := &s.Destinations[i]
				x.Status, x.ConfirmedAt, x.ExpiresAt, x.UnsubscribeToken = StatusActive, st.cfg.Now().UTC(), time.Time{}, unsub
				d = *x
			}
		}
		body, err := json.Marshal(s)
		if err != nil {
			return err
		}
		pipe.Set(ctx, subKey(s.ID), body, 0)
		pipe.Del(ctx, tokenKey(token))
		pipe.ZRem(ctx, pendingKey, pendingMember(s.ID, d.ID))
		pipe.Set(ctx, tokenKey(unsub), PurposeUnsubscribe+"|"+s.ID+"|"+d.ID, 0)
		return nil
	})
	return s, d, err
}

// Unsubscribe uses an unsubscribe token, removing its destination (and an
// emptied subscriber); it returns both, secrets included. Errors wrap
// ErrTokenNotFound.
func (st *Store) Unsubscribe(ctx context.Context, token string) (Subscriber, Destination, error) {
	var s Subscriber
	var d Destination
	err := st.update(ctx, token, PurposeUnsubscribe, func(pipe redis.Pipeliner, info TokenInfo) error {
		s, d = info.Subscriber, info.Destination
		st.removeDestination(ctx, pipe, &s, d)
		return nil
	})
	if err == nil && len(s.Destinations) == 0 {
		st.release(ctx, s.ID)
	}
	return s, d, err
}

// removeDestination queues removing d (and an emptied s); s is updated.
func (st *Store) removeDestination(ctx context.Context, pipe redis.Pipeliner, s *Subscriber, d Destination) {
	kept := slices.DeleteFunc(slices.Clone(s.Destinations), func(x Destination) bool { return x.ID == d.ID })
	s.Destinations = kept
	core, _ := d.Core()
	pipe.Del(ctx, coreKey(s.Tenant, core))
	pipe.ZRem(ctx, pendingKey, pendingMember(s.ID, d.ID))
	if d.UnsubscribeToken != "" {
		pipe.Del(ctx, tokenKey(d.UnsubscribeToken))
	}
	if len(kept) == 0 {
		pipe.Del(ctx, subKey(s.ID))
		pipe.ZRem(ctx, subsKey, s.ID)
		pipe.HDel(ctx, st.records.OwnersKey(), s.ID)
		pipe.ZRem(ctx, st.records.TenantIndex(s.Tenant), s.ID)
		return
	}
	body, _ := json.Marshal(s)
	pipe.Set(ctx, subKey(s.ID), body, 0)
}

// maxTxTries bounds optimistic transaction retries.
const maxTxTries = 8

// update runs fn in a transaction over a token's subscriber, retrying on
// a concurrent change.
func (st *Store) update(ctx context.Context, token, purpose string, fn func(redis.Pipeliner, TokenInfo) error) error {
	for range maxTxTries {
		var id string
		if len(token) == 64 && isHex(token) {
			v, err := st.rdb.Get(ctx, tokenKey(token)).Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				return fmt.Errorf("subscriber: token: %w", err)
			}
			if p := strings.Split(v, "|"); len(p) == 3 {
				id = p[1]
			}
		}
		if id == "" {
			return ErrTokenNotFound
		}
		err := st.rdb.Watch(ctx, func(tx *redis.Tx) error {
			info, err := st.lookup(ctx, token)
			if err != nil {
				return err
			}
			if info.Purpose != purpose || info.Subscriber.ID != id {
				return ErrTokenNotFound
			}
			_, err = tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error { return fn(pipe, info) })
			return err
		}, subKey(id), tokenKey(token))
		if errors.Is(err, redis.TxFailedErr) {
			continue
		}
		return err
	}
	return fmt.Errorf("subscriber: token update: too much contention")
}
