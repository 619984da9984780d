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
	for _, d := range s.Destinations {
		if d.ID == id {
			return d, true
		}
	}
	return Destination{}, false
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
	if len(s) != len(prefix)+hexLen || !strings.HasPrefix(s, prefix) {
		return false
	}
	return isHex(s[len(prefix):])
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
