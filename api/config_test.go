package api

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate_apiKeys(t *testing.T) {
	tests := []struct {
		name    string
		keys    string
		wantErr string // substring; "" means valid
	}{
		{"empty", "", ""},
		{"one key", "abc:read", ""},
		{"several keys and scopes", "abc:read,write; def:admin ;", ""},
		{"upper-case scope", "abc:ADMIN", ""},
		{"empty key", ":read", "entry 1: empty key"},
		{"blank key", "abc:read;  :write", "entry 2: empty key"},
		{"no colon", "abc:read;def", "entry 2: no scope"},
		{"no scope", "abc:", "entry 1: no scope"},
		{"empty scope in list", "abc:read,,write", "entry 1: empty scope"},
		{"unknown scope", "abc:read;def:root", `entry 2: unknown scope "root"`},
		{"duplicate key", "abc:read;def:write;abc:admin", "entry 3: duplicate key (same as entry 1)"},
		{"whitespace inside key", "ab c:read", "entry 1: key contains whitespace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Config{APIKeys: tt.keys}.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate() = %v, want an error wrapping ErrInvalidConfig", err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Validate() = %q, want it to contain %q", err, tt.wantErr)
			}
			for _, secret := range []string{"abc", "def"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q contains key material %q", err, secret)
				}
			}
		})
	}
}

func TestConfigValidate_unknownScopeIsErrUnknownScope(t *testing.T) {
	if err := (Config{APIKeys: "k:superuser"}).Validate(); !errors.Is(err, ErrUnknownScope) {
		t.Errorf("Validate() = %v, want it to wrap ErrUnknownScope", err)
	}
}

func TestConfigValidate_otherFields(t *testing.T) {
	ok := func(context.Context) error { return nil }
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"zero value", Config{}, ""},
		{"test address", Config{Addr: "127.0.0.1:0"}, ""},
		{"address without port", Config{Addr: "localhost"}, "Addr"},
		{"negative body limit", Config{BodyLimit: -1}, "BodyLimit"},
		{"negative read timeout", Config{ReadTimeout: -time.Second}, "ReadTimeout"},
		{"negative shutdown timeout", Config{ShutdownTimeout: -time.Second}, "ShutdownTimeout"},
		{"check without name", Config{Checks: []ReadinessCheck{{Check: ok}}}, "Checks[0] has no name"},
		{"check without func", Config{Checks: []ReadinessCheck{{Name: "redis"}}}, "nil Check"},
		{"duplicate check", Config{Checks: []ReadinessCheck{{"redis", ok}, {"redis", ok}}}, `duplicate name "redis"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.wantErr != "" && (!errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Validate() = %v, want ErrInvalidConfig mentioning %q", err, tt.wantErr)
			}
		})
	}
}

func TestKeyring_lookupHighestScope(t *testing.T) {
	ring, err := parseAPIKeys("a:read,admin;b:write;c:read")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		key       string
		wantScope Scope
		wantOK    bool
	}{
		{"a", ScopeAdmin, true},
		{"b", ScopeWrite, true},
		{"c", ScopeRead, true},
		{"d", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		if k, ok := ring.lookup(tt.key); k.scope != tt.wantScope || ok != tt.wantOK {
			t.Errorf("lookup(%q) = %v, %v, want %v, %v", tt.key, k.scope, ok, tt.wantScope, tt.wantOK)
		}
	}
}

func TestScope_allowsImpliedScopes(t *testing.T) {
	tests := []struct {
		have, need Scope
		want       bool
	}{
		{ScopeRead, ScopeRead, true},
		{ScopeRead, ScopeWrite, false},
		{ScopeWrite, ScopeRead, true},
		{ScopeWrite, ScopeAdmin, false},
		{ScopeAdmin, ScopeWrite, true},
		{ScopeAdmin, ScopeRead, true},
		{Scope(0), ScopeRead, false},
		{Scope(9), ScopeRead, false},
	}
	for _, tt := range tests {
		if got := tt.have.Allows(tt.need); got != tt.want {
			t.Errorf("%v.Allows(%v) = %v, want %v", tt.have, tt.need, got, tt.want)
		}
	}
}

func FuzzParseAPIKeys(f *testing.F) {
	for _, s := range []string{"", "k:read", "a:read,write;b:admin", ":", ";;", "a:x", "a:read;a:read"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ring, err := parseAPIKeys(s)
		if err != nil {
			return
		}
		for _, k := range ring.keys {
			if !k.scope.Valid() {
				t.Fatalf("parsed an invalid scope %v from %q", k.scope, s)
			}
		}
	})
}

func TestParseAPIKeys_fields(t *testing.T) {
	tests := []struct {
		in      string
		want    apiKey
		wantErr string
	}{
		{in: "k:write", want: apiKey{scope: ScopeWrite}},
		{in: "k:write:rate=5000:tenant=shop", want: apiKey{scope: ScopeWrite, tenant: "shop", limits: KeyLimits{Rate: 5000}}},
		{in: "k:read,write: burst=20 : RATE=2.5", want: apiKey{scope: ScopeWrite, limits: KeyLimits{Rate: 2.5, Burst: 20}}},
		{in: "k:write:tenant=", wantErr: "want name=value"},
		{in: "k:write:tenant=a b", wantErr: "tenant"},
		{in: "k:write:tenant=" + strings.Repeat("t", MaxTenantLen+1), wantErr: "tenant"},
		{in: "k:write:rate=0", wantErr: "rate"},
		{in: "k:write:rate=-1", wantErr: "rate"},
		{in: "k:write:rate=NaN", wantErr: "rate"},
		{in: "k:write:burst=1.5", wantErr: "burst"},
		{in: "k:write:owner=x", wantErr: "unknown field"},
		{in: "k:write:rate=1:rate=2", wantErr: "twice"},
		{in: "k::tenant=x", wantErr: "no scope"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			ring, err := parseAPIKeys(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseAPIKeys(%q) = %v, want an error mentioning %q", tt.in, err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "k:") {
					t.Fatalf("error %q shows key material", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, ok := ring.lookup("k")
			got.digest = [32]byte{}
			if !ok || got != tt.want {
				t.Fatalf("lookup = %+v, %v, want %+v", got, ok, tt.want)
			}
		})
	}
}
