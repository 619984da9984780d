package apitest

import (
	"net/http"
	"testing"

	"github.com/dropstream/dropstream/api"
)

// Cap describes a create route whose objects are capped per caller, for
// CheckCap.
type Cap struct {
	// Max is the cap per caller the server was configured with.
	Max int
	// Create returns the request creating the i-th distinct object.
	Create func(i int) (method, path string, body any)
	// ID reads the created object's id from a create's answer.
	ID func(t testing.TB, r Response) string
	// Delete returns the path that DELETE removes the object id at.
	Delete func(id string) string
	// Key and OtherKey are two write keys (api.HeaderAPIKey).
	Key, OtherKey string
}

// CheckCap checks a capped create route as a caller sees it: Max creates
// succeed, the next one is refused with 409 "quota_exceeded", another key
// still creates, and deleting one object frees its slot.
func CheckCap(t *testing.T, srv *api.Server, c Cap) {
	t.Helper()
	create := func(i int, key string) Response {
		method, path, body := c.Create(i)
		return Request(t, srv, method, path, body, api.HeaderAPIKey, key)
	}
	created := func(r Response) bool { return r.Status == http.StatusCreated || r.Status == http.StatusOK }
	var first string
	for i := range c.Max {
		r := create(i, c.Key)
		if !created(r) {
			t.Fatalf("create %d of %d = %d %s, want it created", i+1, c.Max, r.Status, r.Body)
		}
		if i == 0 {
			first = c.ID(t, r)
		}
	}
	WantEnvelope(t, create(c.Max, c.Key), http.StatusConflict, "quota_exceeded")
	if r := create(c.Max+1, c.OtherKey); !created(r) {
		t.Fatalf("another key's create = %d %s, want it created: each key has its own cap", r.Status, r.Body)
	}
	if r := Request(t, srv, http.MethodDelete, c.Delete(first), nil, api.HeaderAPIKey, c.Key); r.Status != http.StatusNoContent && r.Status != http.StatusOK {
		t.Fatalf("delete %s = %d %s", first, r.Status, r.Body)
	}
	if r := create(c.Max+2, c.Key); !created(r) {
		t.Fatalf("create after a delete = %d %s, want it created: the delete freed a slot", r.Status, r.Body)
	}
}
