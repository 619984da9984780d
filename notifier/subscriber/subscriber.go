// Package subscriber keeps the notifier's subscribers in Redis: up to
// MaxDestinations destinations each, a unique core per destination, double
// opt-in, unsubscribe tokens and preferences.
//
// Every key shares the hash tag {notifier} (one Redis Cluster slot):
//
//	ds:{notifier}:sub:<id>              string: the subscriber as JSON (secrets and tokens included)
//	ds:{notifier}:subs                  sorted set, score 0: every id (paging by id)
//	ds:{notifier}:core:<core hash>      string: "<subscriber id>|<destination id>"; the uniqueness of a core
//	ds:{notifier}:token:<token hash>    string: "confirm|<id>|<dest>" (expires with the opt-in) or "unsub|<id>|<dest>"
//	ds:{notifier}:pending               sorted set: "<id>|<dest>" scored by the opt-in's expiry (Unix ms)
//
// Tokens are 32 random bytes; only their SHA-256 names a key.
package subscriber

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
)

// MaxNameLen bounds Subscriber.Name.
const MaxNameLen = 128

// Subscriber receives notifications at destinations, on preferences.
type Subscriber struct {
	// ID is "s_" + 12 hex of creation Unix ms + 16 random hex: sorts by age.
	ID string `json:"id" openapi:"readonly"`
	// Tenant is the caller's, set by the API; only it and admin keys see
	// the subscriber. Empty is tenancy.Open.
	Tenant string `json:"tenant,omitempty" openapi:"readonly"`
	// Name is a label: 1..MaxNameLen bytes of printable UTF-8.
	Name string `json:"name"`
	// TimeZone is the IANA zone of quiet hours and digests; empty is UTC.
	TimeZone string `json:"time_zone,omitempty"`
	// Preferences filter and batch what reaches the subscriber.
	Preferences Preferences `json:"preferences" openapi:"optional"`
	// Destinations are where the subscriber is reached, 1..MaxDestinations.
	Destinations []Destination `json:"destinations"`
	// CreatedAt is set by the store.
	CreatedAt time.Time `json:"created_at" openapi:"readonly"`
}

// Validate reports every invalid field for creation, ignoring store-set
// ones. Errors wrap ErrInvalid.
func (s Subscriber) Validate() error {
	var errs []error
	if s.Name == "" || len(s.Name) > MaxNameLen || !printable(s.Name) {
		errs = append(errs, fmt.Errorf("name: want 1-%d bytes of printable UTF-8", MaxNameLen))
	}
	if _, err := LoadLocation(s.TimeZone); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, s.Preferences.Validate())
	if len(s.Destinations) == 0 || len(s.Destinations) > MaxDestinations {
		errs = append(errs, fmt.Errorf("destinations: want 1-%d", MaxDestinations))
	}
	cores := map[string]bool{}
	for i, d := range s.Destinations {
		if err := d.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("destination %d: %w", i, err))
			continue
		}
		core, _ := d.Core()
		if cores[core] {
			errs = append(errs, fmt.Errorf("destination %d: given twice", i))
		}
		cores[core] = true
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// Location returns the subscriber's time zone (UTC when unknown).
func (s Subscriber) Location() *time.Location {
	loc, err := LoadLocation(s.TimeZone)
	if err != nil {
		return time.UTC
	}
	return loc
}

// Destination returns the destination with the id.
func (s Subscriber) Destination(id string) (Destination, bool) {
	i := slices.IndexFunc(s.Destinations, func(d Destination) bool { return d.ID == id })
	if i < 0 {
		return Destination{}, false
	}
	return s.Destinations[i], true
}

// public returns s without secrets.
func (s Subscriber) public() Subscriber {
	s.Destinations = append([]Destination(nil), s.Destinations...)
	for i := range s.Destinations {
		s.Destinations[i].Secret = ""
		s.Destinations[i].UnsubscribeToken = ""
	}
	return s
}

func printable(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) })
}

// validID reports whether s has the form of a generated id with the prefix.
func validID(prefix, s string, hexLen int) bool {
	return len(s) == len(prefix)+hexLen && strings.HasPrefix(s, prefix) && isHex(s[len(prefix):])
}

func isHex(s string) bool { return strings.Trim(s, "0123456789abcdef") == "" }

// ValidSubscriberID reports whether s has the form of a subscriber id.
func ValidSubscriberID(s string) bool { return validID("s_", s, 28) }

// ResolveMany returns the subscribers of ids by id, secrets included, in
// one MGET. Unknown ids and undecodable records (logged) are absent. The
// subscribers share their slices, maps and pointers with other calls'
// (a record read before is decoded once): callers must not change them.
func (st *Store) ResolveMany(ctx context.Context, ids []string) (map[string]Subscriber, error) {
	want := make([]string, 0, len(ids))
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if ValidSubscriberID(id) && !seen[id] {
			seen[id] = true
			want = append(want, id)
		}
	}
	subs, err := st.load(ctx, "resolve", want)
	if err != nil {
		return nil, err
	}
	out := make(map[string]Subscriber, len(subs))
	for _, s := range subs {
		out[s.ID] = s
	}
	return out, nil
}

// load reads the subscribers of ids in order in one MGET, skipping missing
// and undecodable ones; a record unchanged since it was last read is not
// decoded again. op names the caller in errors.
func (st *Store) load(ctx context.Context, op string, ids []string) ([]Subscriber, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	args := make([]any, 1+len(ids))
	args[0] = "mget"
	keys := args[1:]
	for i, id := range ids {
		if d, ok := st.decoded.Peek(id); ok {
			keys[i] = d.key
		} else {
			keys[i] = subKey(id)
		}
	}
	cmd := redis.NewSliceCmd(ctx, args...)
	_ = st.rdb.Process(ctx, cmd)
	vals, err := cmd.Result()
	if err != nil {
		return nil, fmt.Errorf("subscriber: %s %d subscribers: %w", op, len(ids), err)
	}
	out := make([]Subscriber, 0, len(ids))
	for i, v := range vals {
		raw, ok := v.(string)
		if !ok {
			continue
		}
		if d, ok := st.decoded.Get(ids[i]); ok && d.raw == raw {
			out = append(out, d.sub)
			continue
		}
		var s Subscriber
		if err := json.Unmarshal([]byte(raw), &s); err != nil || s.ID != ids[i] {
			st.cfg.Logger.WarnContext(ctx, "subscriber: skipping undecodable record", "subscriber_id", ids[i], "error", err)
			continue
		}
		st.decoded.Add(ids[i], decoded{key: keys[i], raw: raw, sub: s})
		out = append(out, s)
	}
	return out, nil
}

// maxDecoded bounds the decoded records a store keeps.
const maxDecoded = 8192

// decoded is a subscriber's latest decoded record with its JSON, so an
// unchanged record is not decoded again, and its key, boxed.
type decoded struct {
	key any // subKey(id)
	raw string
	sub Subscriber
}

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

// tokenParts returns the purpose, subscriber id and destination id a
// token names; errors wrap ErrTokenNotFound.
func (st *Store) tokenParts(ctx context.Context, token string) ([]string, error) {
	if len(token) != 64 || !isHex(token) {
		return nil, ErrTokenNotFound
	}
	v, err := st.rdb.Get(ctx, tokenKey(token)).Result()
	if errors.Is(err, redis.Nil) {
		return nil, ErrTokenNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("subscriber: token: %w", err)
	}
	parts := strings.Split(v, "|")
	if len(parts) != 3 {
		return nil, ErrTokenNotFound
	}
	return parts, nil
}

func (st *Store) lookup(ctx context.Context, token string) (TokenInfo, error) {
	parts, err := st.tokenParts(ctx, token)
	if err != nil {
		return TokenInfo{}, err
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
		s = info.Subscriber // lookup found info.Destination in it
		x := &s.Destinations[slices.IndexFunc(s.Destinations, func(x Destination) bool { return x.ID == info.Destination.ID })]
		x.Status, x.ConfirmedAt, x.ExpiresAt, x.UnsubscribeToken = StatusActive, st.cfg.Now().UTC(), time.Time{}, unsub
		d = *x
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
		parts, err := st.tokenParts(ctx, token)
		if err != nil {
			return err
		}
		id := parts[1]
		err = st.rdb.Watch(ctx, func(tx *redis.Tx) error {
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
