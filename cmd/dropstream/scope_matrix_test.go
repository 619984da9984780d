package main

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/api/apitest"
)

// Every operation of the binary answers by its scope: on a server with
// keys, no key or an unknown one is 401 and a lower scope 403, and the
// scope it needs is let through; on an open server no request is refused
// for want of a key. Public routes never ask for one.
func TestScopeMatrix_everyOperationOnAKeyedAndAnOpenServer(t *testing.T) {
	keys := map[api.Scope]string{api.ScopeRead: "m-read", api.ScopeWrite: "m-write", api.ScopeAdmin: "m-admin"}
	keyed := binaryAPIWith(t, func(c *Config) { c.APIKeys = "m-read:read;m-write:write;m-admin:admin" })
	open := binaryAPI(t)
	send := func(srv *api.Server, op api.Operation, key string) int {
		req := httptest.NewRequest(op.Method, concrete(op.Path), nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		return apitest.Do(t, srv, req).Status
	}
	refused := func(status int) bool { return status == http.StatusUnauthorized || status == http.StatusForbidden }
	ops := keyed.Operations()
	if len(ops) < 50 {
		t.Fatalf("%d operations registered, want every flow's", len(ops))
	}
	for _, op := range ops {
		if op.Method == http.MethodGet && op.ContentType == "text/event-stream" {
			continue // a stream never ends its answer
		}
		name := op.Method + " " + op.Path
		if op.Public {
			if s := send(keyed, op, ""); refused(s) {
				t.Errorf("%s needs no key but answered %d without one", name, s)
			}
			continue
		}
		if s := send(keyed, op, ""); s != http.StatusUnauthorized {
			t.Errorf("%s without a key: %d, want 401", name, s)
		}
		if s := send(keyed, op, "m-unknown"); s != http.StatusUnauthorized {
			t.Errorf("%s with an unknown key: %d, want 401", name, s)
		}
		for _, sc := range []api.Scope{api.ScopeRead, api.ScopeWrite, api.ScopeAdmin} {
			s := send(keyed, op, keys[sc])
			switch {
			case sc.Allows(op.Scope) && refused(s):
				t.Errorf("%s with a %s key: %d, want it let through", name, sc, s)
			case !sc.Allows(op.Scope) && s != http.StatusForbidden:
				t.Errorf("%s with a %s key: %d, want 403", name, sc, s)
			}
		}
		if s := send(open, op, ""); refused(s) {
			t.Errorf("%s on an open server: %d without a key", name, s)
		}
	}
}
