package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
)

// Scope is the permission level of an API key; each implies the lower ones.
type Scope int

// The scopes, lowest first. The zero Scope is no permission at all.
const (
	ScopeRead Scope = iota + 1
	ScopeWrite
	ScopeAdmin
)

// ErrUnknownScope is wrapped by [ParseScope] for a name that is not a scope.
var ErrUnknownScope = errors.New("unknown scope")

// scopeNames are the scopes' names, by value.
var scopeNames = [...]string{ScopeRead: "read", ScopeWrite: "write", ScopeAdmin: "admin"}

// String returns the scope's name, or "Scope(n)" for an invalid value.
func (s Scope) String() string {
	if s.Valid() {
		return scopeNames[s]
	}
	return fmt.Sprintf("Scope(%d)", int(s))
}

// Valid reports whether s is one of ScopeRead, ScopeWrite, ScopeAdmin.
func (s Scope) Valid() bool { return s >= ScopeRead && s <= ScopeAdmin }

// Allows reports whether a key holding s may use a route requiring required.
func (s Scope) Allows(required Scope) bool { return s.Valid() && s >= required }

// ParseScope parses "read", "write" or "admin" (case-insensitive), else
// fails with [ErrUnknownScope].
func ParseScope(name string) (Scope, error) {
	for s := ScopeRead; s <= ScopeAdmin; s++ {
		if strings.EqualFold(name, scopeNames[s]) {
			return s, nil
		}
	}
	return 0, fmt.Errorf("%w %q (want read, write or admin)", ErrUnknownScope, name)
}

// apiKey is one configured key, kept as a digest so that comparisons take
// the same time whatever the presented key's length.
type apiKey struct {
	digest [sha256.Size]byte
	scope  Scope
	// tenant owns what the key creates; "" means the key is a tenant of
	// its own (see [Tenant]).
	tenant string
	// limits override every class's write limits; zero fields keep them.
	limits KeyLimits
}

// KeyLimits are the write limits a key carries in DROPSTREAM_API_KEYS
// (rate= and burst=). Zero fields keep the route class's defaults.
type KeyLimits struct {
	// Rate is the sustained writes per second.
	Rate float64
	// Burst is the most writes at once.
	Burst int
}

// keyring is the parsed APIKeys setting. The zero keyring is empty (open API).
type keyring struct {
	keys []apiKey
}

// open reports whether no key is configured.
func (k keyring) open() bool { return len(k.keys) == 0 }

// lookup returns the key matching presented, comparing against every key
// in constant time.
func (k keyring) lookup(presented string) (apiKey, bool) {
	d := sha256.Sum256([]byte(presented))
	found := 0 // 1-based index of the match
	for i, key := range k.keys {
		eq := subtle.ConstantTimeCompare(d[:], key.digest[:])
		found = subtle.ConstantTimeSelect(eq, i+1, found)
	}
	if found == 0 {
		return apiKey{}, false
	}
	return k.keys[found-1], true
}

// ValidateAPIKeys reports the first problem of an API key list,
// "key:scope,scope[:field=value…];key2:scope": scopes read, write, admin
// (each implying the ones before); fields tenant=NAME, rate=N, burst=N.
// The error names an entry by position, never by key; empty is valid.
func ValidateAPIKeys(s string) error {
	_, err := parseAPIKeys(s)
	return err
}

// parseAPIKeys parses the list ValidateAPIKeys checks; a key's scope is
// the highest listed. Errors name an entry by position, never by key.
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
		key, rest, ok := strings.Cut(entry, ":")
		key = strings.TrimSpace(key)
		parts := strings.Split(rest, ":")
		scopes := parts[0]
		switch {
		case key == "":
			return keyring{}, fmt.Errorf("entry %d: empty key", n)
		case strings.ContainsFunc(key, unicode.IsSpace) || strings.Contains(key, ","):
			return keyring{}, fmt.Errorf("entry %d: key contains whitespace or ','", n)
		case !ok || strings.TrimSpace(scopes) == "":
			return keyring{}, fmt.Errorf("entry %d: no scope (want key:scope[,scope][:field=value])", n)
		}
		if prev, dup := first[key]; dup {
			return keyring{}, fmt.Errorf("entry %d: duplicate key (same as entry %d)", n, prev)
		}
		first[key] = n
		k := apiKey{digest: sha256.Sum256([]byte(key))}
		for _, name := range strings.Split(scopes, ",") {
			name = strings.TrimSpace(name)
			if name == "" {
				return keyring{}, fmt.Errorf("entry %d: empty scope", n)
			}
			sc, err := ParseScope(name)
			if err != nil {
				return keyring{}, fmt.Errorf("entry %d: %w", n, err)
			}
			k.scope = max(k.scope, sc)
		}
		if err := k.parseFields(parts[1:]); err != nil {
			return keyring{}, fmt.Errorf("entry %d: %w", n, err)
		}
		ring.keys = append(ring.keys, k)
	}
	return ring, nil
}

// MaxTenantLen bounds a tenant's name.
const MaxTenantLen = 64

// parseFields sets k's named fields from "name=value" strings.
func (k *apiKey) parseFields(fields []string) error {
	seen := map[string]bool{}
	for _, f := range fields {
		name, value, ok := strings.Cut(strings.TrimSpace(f), "=")
		name, value = strings.ToLower(strings.TrimSpace(name)), strings.TrimSpace(value)
		if !ok || value == "" {
			return fmt.Errorf("field %q: want name=value (tenant, rate or burst)", name)
		}
		if seen[name] {
			return fmt.Errorf("field %s given twice", name)
		}
		seen[name] = true
		switch name {
		case "tenant":
			if !validTenant(value) {
				return fmt.Errorf("tenant: want 1 to %d letters, digits, '.', '_' or '-'", MaxTenantLen)
			}
			k.tenant = value
		case "rate":
			r, err := strconv.ParseFloat(value, 64)
			if err != nil || !(r > 0) || math.IsInf(r, 0) {
				return fmt.Errorf("rate: want a positive number of writes a second")
			}
			k.limits.Rate = r
		case "burst":
			b, err := strconv.Atoi(value)
			if err != nil || b < 1 {
				return fmt.Errorf("burst: want a positive whole number of writes")
			}
			k.limits.Burst = b
		default:
			return fmt.Errorf("unknown field %q (want tenant, rate or burst)", name)
		}
	}
	return nil
}

// validTenant reports whether name is a tenant's name: 1 to MaxTenantLen
// ASCII letters, digits, '.', '_' or '-'.
func validTenant(name string) bool { return len(name) <= MaxTenantLen && plainName(name) }

// plainName reports whether s is one or more ASCII letters, digits, '.',
// '_' or '-'.
func plainName(s string) bool {
	return s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
	})
}
