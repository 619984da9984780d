package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// Scope is the permission level of an API key. Scopes are ordered: a key
// with a higher scope may do everything a lower scope allows (admin implies
// write, write implies read).
type Scope int

// The scopes, lowest first. The zero Scope is no permission at all.
const (
	ScopeRead Scope = iota + 1
	ScopeWrite
	ScopeAdmin
)

// ErrUnknownScope is wrapped by [ParseScope] for a name that is not a scope.
var ErrUnknownScope = errors.New("unknown scope")

// String returns the scope's name as written in DROPSTREAM_API_KEYS
// ("read", "write", "admin"), or "Scope(n)" for an invalid value.
func (s Scope) String() string {
	switch s {
	case ScopeRead:
		return "read"
	case ScopeWrite:
		return "write"
	case ScopeAdmin:
		return "admin"
	}
	return fmt.Sprintf("Scope(%d)", int(s))
}

// Valid reports whether s is one of ScopeRead, ScopeWrite, ScopeAdmin.
func (s Scope) Valid() bool { return s >= ScopeRead && s <= ScopeAdmin }

// Allows reports whether a key holding s may use a route requiring required.
func (s Scope) Allows(required Scope) bool { return s.Valid() && s >= required }

// ParseScope parses "read", "write" or "admin" (case-insensitive). Any other
// name yields an error wrapping [ErrUnknownScope].
func ParseScope(name string) (Scope, error) {
	switch strings.ToLower(name) {
	case "read":
		return ScopeRead, nil
	case "write":
		return ScopeWrite, nil
	case "admin":
		return ScopeAdmin, nil
	}
	return 0, fmt.Errorf("%w %q (want read, write or admin)", ErrUnknownScope, name)
}

// apiKey is one configured key. Only a digest of the key is kept, so that
// comparisons take the same time whatever the presented key's length.
type apiKey struct {
	digest [sha256.Size]byte
	scope  Scope
}

// keyring is the parsed APIKeys setting. The zero keyring is empty (open API).
type keyring struct {
	keys []apiKey
}

// open reports whether no key is configured.
func (k keyring) open() bool { return len(k.keys) == 0 }

// lookup returns the scope of presented and whether it is a configured key.
// It compares against every key in constant time: neither the position of
// a match nor the length of the keys influences its duration.
func (k keyring) lookup(presented string) (Scope, bool) {
	d := sha256.Sum256([]byte(presented))
	found := 0
	for _, key := range k.keys {
		eq := subtle.ConstantTimeCompare(d[:], key.digest[:])
		found = subtle.ConstantTimeSelect(eq, int(key.scope), found)
	}
	return Scope(found), found != 0
}

// ValidateAPIKeys reports the first problem of an API key list in the
// format of [Config.APIKeys] (DROPSTREAM_API_KEYS): an empty key, a key
// with whitespace or ',', an entry without a scope, an unknown scope
// (wrapping [ErrUnknownScope]) or a key listed twice. The error names the
// entry by its 1-based position, never by its key. An empty list is valid
// (the API is open).
func ValidateAPIKeys(s string) error {
	_, err := parseAPIKeys(s)
	return err
}

// parseAPIKeys parses "key:scope,scope;key2:scope". A key's scope is the
// highest one listed. Errors name the entry by its 1-based position and
// never contain key material.
func parseAPIKeys(s string) (keyring, error) {
	var (
		ring  keyring
		first = map[string]int{} // key -> entry number
	)
	for i, entry := range strings.Split(s, ";") {
		n := i + 1
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		key, scopes, ok := strings.Cut(entry, ":")
		key = strings.TrimSpace(key)
		switch {
		case key == "":
			return keyring{}, fmt.Errorf("entry %d: empty key", n)
		case strings.ContainsFunc(key, unicode.IsSpace) || strings.Contains(key, ","):
			return keyring{}, fmt.Errorf("entry %d: key contains whitespace or ','", n)
		case !ok || strings.TrimSpace(scopes) == "":
			return keyring{}, fmt.Errorf("entry %d: no scope (want key:scope[,scope])", n)
		}
		if prev, dup := first[key]; dup {
			return keyring{}, fmt.Errorf("entry %d: duplicate key (same as entry %d)", n, prev)
		}
		first[key] = n
		var best Scope
		for _, name := range strings.Split(scopes, ",") {
			name = strings.TrimSpace(name)
			if name == "" {
				return keyring{}, fmt.Errorf("entry %d: empty scope", n)
			}
			sc, err := ParseScope(name)
			if err != nil {
				return keyring{}, fmt.Errorf("entry %d: %w", n, err)
			}
			best = max(best, sc)
		}
		ring.keys = append(ring.keys, apiKey{digest: sha256.Sum256([]byte(key)), scope: best})
	}
	return ring, nil
}
