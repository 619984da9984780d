package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/api/apitest"
	"github.com/dropstream/dropstream/flows/checkout"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/history"
)

// The ownership test's keys: two tenants' write keys and an admin key.
const (
	keyA, keyB, keyAdmin = "own-key-a", "own-key-b", "own-key-admin"
	ownershipKeys        = keyA + ":write:tenant=ta;" + keyB + ":write:tenant=tb;" + keyAdmin + ":admin"
)

// params are the path parameters naming objects, by name.
type params map[string]string

// ownedKind is one kind of object a client creates, as the ownership test
// makes one: the fixture of every operation whose path names it.
type ownedKind struct {
	// create is the operation creating one ("POST /v1/watchers"); its
	// path parameters are those of the parent object, and plain values.
	create string
	// parent is the kind (its key in ownedKinds) whose object create's
	// path names; needs are kinds the body or setup names, of the same
	// tenant.
	parent string
	needs  []string
	// body is create's JSON body; n makes each object's unique; deps are
	// the parameters of the parent and of the needed objects.
	body func(n int64, deps params) string
	// own returns the created object's own path parameters from create's
	// answer.
	own func(created map[string]any) params
	// store, set in place of create and body, stores an object no client
	// creates (a notification, as the notifier records it) for the parent
	// object, and returns its own path parameters.
	store func(t *testing.T, o *ownership, parent params) params
	// setup are operations the owner runs on a new object (stock, credit).
	setup []string
	// read is the operation that shows the object to its owner, to check
	// that another tenant's calls changed nothing.
	read string
}

// ownedKinds are the fixtures, keyed by what names an object in a path:
// a path prefix ending in a parameter ("/v1/watchers/{id}": every
// operation under it is on a watcher), or a parameter alone ("{item_id}":
// an item wherever it appears). Every path parameter of every operation
// is one of these, a plain value (plainParams) or shared data
// (sharedParams): a new route fails the test until it is classified here.
var ownedKinds = map[string]ownedKind{
	"/v1/watchers/{id}": {
		create: "POST /v1/watchers",
		body: func(n int64, _ params) string {
			return fmt.Sprintf(`{"name":"w%d","provider":"simulator","venue":"v1","channel":"log"}`, n)
		},
		own:  field("id", "id"),
		read: "GET /v1/watchers/{id}",
	},
	"/v1/sources/{id}": {
		create: "POST /v1/sources",
		body: func(n int64, _ params) string {
			return fmt.Sprintf(`{"id":"own-src-%dx","provider":"simulator","base_url":"https://sim.example.org","scopes":[{"venue":"1","date":"2026-12-01","party_size":2}]}`, n)
		},
		own:  field("id", "id"),
		read: "GET /v1/sources/{id}",
	},
	"/v1/subscribers/{id}": {
		create: "POST /v1/subscribers",
		body: func(n int64, _ params) string {
			return fmt.Sprintf(`{"name":"s%d","destinations":[{"kind":"webhook","address":"https://hooks.example.org/s%d"}]}`, n, n)
		},
		own:  field("id", "id"),
		read: "GET /v1/subscribers/{id}",
	},
	"/v1/standing-searches/{id}": {
		create: "POST /v1/standing-searches",
		needs:  []string{"/v1/subscribers/{id}"},
		body: func(n int64, deps params) string {
			return fmt.Sprintf(`{"name":"ss%d","subscriberId":%q,"filter":{"filterType":"sellOffer","type":"group",`+
				`"elements":[{"type":"logical","logicalTag":"product","productIds":["p%d"]}]}}`, n, deps["id"], n)
		},
		own:  field("searchId", "id"),
		read: "GET /v1/standing-searches/{id}",
	},
	"/v1/offers/{id}": {
		create: "POST /v1/offers",
		body: func(n int64, _ params) string {
			return fmt.Sprintf(`{"offerId":"own-offer-%dx","handler":"standard","productId":"p1","sellerId":"s1","quantity":10,`+
				`"pricePlans":[{"planId":"a","minQuantity":1,"unitPrice":500}],"deliveryMethods":[{"id":"post","cost":50}],`+
				`"paymentMethods":[{"id":"card","cost":7}],"locations":["l1"]}`, n)
		},
		own:  field("offerId", "id"),
		read: "GET /v1/offers/{id}",
	},
	"/v1/subscriptions/{id}": {
		create: "POST /v1/subscriptions",
		// Both tenants subscribe the same address: ownership is the
		// tenant's, not the address's.
		body: func(n int64, _ params) string {
			return fmt.Sprintf(`{"email":"reader@example.org","body":{"issue":"%d"}}`, n)
		},
		own:  field("id", "id"),
		read: "GET /v1/subscriptions?email=reader@example.org&limit=1000",
	},
	"/v1/feeds/{id}": {
		create: "POST /v1/feeds",
		body: func(n int64, _ params) string {
			return fmt.Sprintf(`{"url":"https://feeds.example.org/own/%d.xml"}`, n)
		},
		own:  field("id", "id"),
		read: "GET /v1/feeds/{id}",
	},
	// A feed both tenants add (one URL): the subscribables and
	// subscriptions of a feed are each tenant's even where the feed is
	// shared. No path names this kind; subscribables are made on it.
	sharedFeed: {
		create: "POST /v1/feeds",
		body:   func(int64, params) string { return `{"url":"https://feeds.example.org/own/shared.xml"}` },
		own:    field("id", "id"),
		read:   "GET /v1/feeds/{id}",
	},
	"/v1/feeds/{id}/subscribables/{name}": {
		create: "POST /v1/feeds/{id}/subscribables",
		parent: sharedFeed,
		body:   func(n int64, _ params) string { return fmt.Sprintf(`{"name":"n%dx","manager":{"kind":"each"}}`, n) },
		own:    field("name", "name"),
		read:   "GET /v1/feeds/{id}/subscribables/{name}",
	},
	"/v1/feed-subscriptions/{sid}": {
		create: "POST /v1/feeds/{id}/subscribables/{name}/subscriptions",
		parent: "/v1/feeds/{id}/subscribables/{name}",
		body: func(n int64, _ params) string {
			return fmt.Sprintf(`{"destination":{"kind":"email","address":"r%d@example.org"}}`, n)
		},
		own:  field("id", "sid"),
		read: "GET /v1/feeds/{id}/subscribables/{name}/subscriptions",
	},
	"/v1/notifications/{id}": {
		parent: "/v1/subscribers/{id}",
		store: func(t *testing.T, o *ownership, sub params) params {
			id := fmt.Sprintf("own-n-%dx", o.n.Add(1))
			rec := history.Record{ID: id, Flow: "test", Event: "test.sent", SubscriberID: sub["id"], Channel: "webhook",
				Subject: "s", Status: "sent", Attempts: 1, At: time.Now().UTC()}
			if err := o.notifier().History().Record(t.Context(), rec); err != nil {
				t.Fatal(err)
			}
			return params{"id": id}
		},
		read: "GET /v1/notifications/{id}/why",
	},
	"{item_id}": {
		create: "POST /stock/item/create/{price}",
		own:    field("item_id", "item_id"),
		setup:  []string{"POST /stock/add/{item_id}/100"},
		read:   "GET /stock/find/{item_id}",
	},
	"{user_id}": {
		create: "POST /payment/create_user",
		own:    field("user_id", "user_id"),
		setup:  []string{"POST /payment/add_funds/{user_id}/100000"},
		read:   "GET /payment/find_user/{user_id}",
	},
	"{order_id}": {
		create: "POST /orders/create/{user_id}",
		parent: "{user_id}",
		needs:  []string{"{item_id}"},
		own:    field("order_id", "order_id"),
		setup:  []string{"POST /orders/addItem/{order_id}/{item_id}"},
		read:   "GET /orders/find/{order_id}",
	},
}

// sharedFeed is the kind of the feed both tenants hold.
const sharedFeed = "feed shared by URL"

// plainParams are path parameters that name no object, with the value
// the test gives them.
var plainParams = map[string]string{
	"price": "10", "amount": "1", "quantity": "1",
	// The checkout's batch routes (admin) create objects from counts.
	"n": "2", "starting_stock": "5", "item_price": "3", "starting_money": "50", "n_items": "2", "n_users": "2",
	// An item of a feed is the feed's: the test feed has none.
	"iid": "no-such-item",
}

// sharedParams are path prefixes whose parameter names no tenant's
// object, and why.
var sharedParams = map[string]string{
	"/v1/availability/{key}":   "the availability of venues, observed for every tenant",
	"/v1/comics/{id}":          "the catalogue of comics for sale, which every buyer sees",
	"/v1/offers/results/{id}":  "a search result, addressed by its filter over the market",
	"/v1/console/traces/{id}":  "the operator console's traces",
	"/v1/admin/stages/{stage}": "the pipeline's stages, the operator's (admin keys)",
	"/v1/confirm/{token}":      "a signed opt-in link: the token is the authority, no key",
	"/v1/unsubscribe/{token}":  "a signed unsubscribe link: the token is the authority, no key",
	"/v1/websub/{id}":          "a WebSub hub's callback, authenticated by its signature, no key",
}

// ownerAnswers are the operations whose owner does not get a 2xx on its
// own object in this test, with the answer it gets (status and code).
var ownerAnswers = map[string]string{
	// The feed the test creates has no items.
	"POST /v1/feeds/{id}/items/{iid}/exclude": "404 item_not_found",
	// No stage runs: a checkout gives its saga up, compensated.
	"POST /orders/checkout/{order_id}": "400 checkout_failed",
	// An order never checked out has no attempt to cancel.
	"POST /v1/admin/sagas/{order_id}/cancel": "404 order_not_found",
}

// unlistedKinds are kinds no list route shows (the checkout contract).
var unlistedKinds = []string{"{item_id}", "{user_id}", "{order_id}"}

// field returns an ownedKind.own reading the answer's JSON field as the
// path parameter param.
func field(jsonName, param string) func(map[string]any) params {
	return func(created map[string]any) params {
		v, _ := created[jsonName].(string)
		return params{param: v}
	}
}

// docParam matches a path parameter of the document.
var docParam = regexp.MustCompile(`\{[^}]+\}`)

// ownership is the test's server, document and counters.
type ownership struct {
	t   *testing.T
	app *app
	srv *api.Server
	doc map[string]any
	n   atomic.Int64
}

// do runs "METHOD /path" with key and body; the exchange is checked
// against the document.
func (o *ownership) do(t *testing.T, key, op, body string) apitest.Response {
	t.Helper()
	method, path, _ := strings.Cut(op, " ")
	var b any
	if body != "" {
		b = body
	}
	return apitest.Request(t, o.srv, method, path, b, "Authorization", "Bearer "+key)
}

// fill replaces the path parameters of op by the values of ps, then of
// plainParams; it fails the test on a parameter with no value.
func fill(t *testing.T, op string, ps params) string {
	t.Helper()
	return docParam.ReplaceAllStringFunc(op, func(p string) string {
		name := strings.Trim(p, "{}")
		if v, ok := ps[name]; ok {
			return v
		}
		if v, ok := plainParams[name]; ok {
			return v
		}
		t.Fatalf("%s: no value for %s", op, p)
		return ""
	})
}

// make creates an object of kind as key's tenant, with its parent and
// needed objects, and returns the parameters naming it and them.
func (o *ownership) make(t *testing.T, key, kind string) params {
	t.Helper()
	k, ok := ownedKinds[kind]
	if !ok {
		t.Fatalf("no fixture of kind %s", kind)
	}
	ps := params{}
	if k.parent != "" {
		ps = o.make(t, key, k.parent)
	}
	deps := params{}
	for _, need := range k.needs {
		maps.Copy(deps, o.make(t, key, need))
	}
	maps.Copy(deps, ps)
	if k.store != nil {
		maps.Copy(ps, k.store(t, o, ps))
		return ps
	}
	body := ""
	if k.body != nil {
		body = k.body(o.n.Add(1), deps)
	}
	res := o.do(t, key, fill(t, k.create, ps), body)
	if res.Status != http.StatusCreated && res.Status != http.StatusOK {
		t.Fatalf("%s as %s: %d %s", k.create, key, res.Status, res.Body)
	}
	var created map[string]any
	res.JSON(t, &created)
	for name, v := range k.own(created) {
		if v == "" {
			t.Fatalf("%s: no %s in %s", k.create, name, res.Body)
		}
		ps[name] = v
	}
	all := maps.Clone(deps)
	maps.Copy(all, ps)
	for _, op := range k.setup {
		if res := o.do(t, key, fill(t, op, all), ""); res.Status/100 != 2 {
			t.Fatalf("%s as %s: %d %s", op, key, res.Status, res.Body)
		}
	}
	return ps
}

// read returns what kind's read operation shows key of the object ps.
func (o *ownership) read(t *testing.T, key, kind string, ps params) string {
	t.Helper()
	res := o.do(t, key, fill(t, ownedKinds[kind].read, ps), "")
	if res.Status != http.StatusOK {
		t.Fatalf("%s as %s: %d %s", ownedKinds[kind].read, key, res.Status, res.Body)
	}
	return string(res.Body)
}

// kindsOf returns the kinds an operation's path names (the deepest per
// parameter), and fails the test on a parameter that is neither an
// object, a plain value nor shared data. shared reports a path under
// sharedParams.
func kindsOf(t *testing.T, op string) (kinds []string, shared bool) {
	t.Helper()
	_, path, _ := strings.Cut(op, " ")
	for prefix := range sharedParams {
		if strings.HasPrefix(path, prefix) {
			return nil, true
		}
	}
	for _, loc := range docParam.FindAllStringIndex(path, -1) {
		param := path[loc[0]:loc[1]]
		upTo := path[:loc[1]]
		kind := ""
		for key := range ownedKinds {
			if key == param || key == upTo {
				kind = key
			}
		}
		switch {
		case kind != "":
			// A parent's parameter is named by the deeper kind.
			kinds = slices.DeleteFunc(kinds, func(k string) bool { return strings.HasPrefix(kind, k) })
			kinds = append(kinds, kind)
		case plainParams[strings.Trim(param, "{}")] != "":
		default:
			t.Errorf("%s: no fixture names its %s: add its kind to ownedKinds (its create operation and body), "+
				"plainParams or sharedParams", op, param)
		}
	}
	return kinds, false
}

// errorCode returns an error answer's code.
func errorCode(body []byte) string {
	var env struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal(body, &env)
	return env.Error.Code
}

// opScope returns the scope the document says an operation needs.
func (o *ownership) opScope(method, path string) string {
	op := o.doc["paths"].(map[string]any)[path].(map[string]any)[strings.ToLower(method)].(map[string]any)
	sec, _ := op["security"].([]any)
	for _, s := range sec {
		for _, scopes := range s.(map[string]any) {
			if l, ok := scopes.([]any); ok && len(l) > 0 {
				return l[0].(string)
			}
		}
	}
	return ""
}

// operations returns the document's operations as "METHOD /path", sorted.
func (o *ownership) operations() []string {
	var ops []string
	for path, item := range o.doc["paths"].(map[string]any) {
		for method := range item.(map[string]any) {
			if m := strings.ToUpper(method); slices.Contains([]string{"GET", "POST", "PUT", "PATCH", "DELETE"}, m) {
				ops = append(ops, m+" "+path)
			}
		}
	}
	sort.Strings(ops)
	return ops
}

func newOwnership(t *testing.T) *ownership {
	redisURL := testenv.RedisURL(t)
	return newOwnershipWith(t, func(c *Config) { c.RedisURL, c.APIKeys = redisURL, ownershipKeys })
}

// newOwnershipWith is the ownership test's binary API with the
// configuration edit makes, and its document.
func newOwnershipWith(t *testing.T, edit func(*Config)) *ownership {
	a, srv := binaryApp(t, edit, map[string]string{checkout.VarTimeout: "200ms"})
	// The document as a client reads it.
	raw, err := json.Marshal(srv.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	return &ownership{t: t, app: a, srv: srv, doc: doc}
}

// notifier returns the app's notifier flow.
func (o *ownership) notifier() *notifier.Flow {
	for _, f := range o.app.flows {
		if nf, ok := f.flow.(*notifier.Flow); ok {
			return nf
		}
	}
	o.t.Fatal("no notifier flow")
	return nil
}

// TestOwnership_everyOperationOfAnotherTenantAnswers404 walks every
// operation of /openapi.json whose path names an object: on objects that
// tenant A really created, tenant B's call answers 404 (403 on an admin
// route) and leaves A's object as it was, A's own call succeeds, and an
// admin key's call answers as A's did. Each path parameter must be
// classified (an object kind with its fixture, a plain value, or shared
// data), so a new route fails here until it is covered.
func TestOwnership_everyOperationOfAnotherTenantAnswers404(t *testing.T) {
	o := newOwnership(t)
	var walked int
	for _, op := range o.operations() {
		kinds, shared := kindsOf(t, op)
		if shared || len(kinds) == 0 {
			continue
		}
		walked++
		method, path, _ := strings.Cut(op, " ")
		adminOnly := o.opScope(method, path) == "admin"
		t.Run(op, func(t *testing.T) {
			// A's objects, and B's own, one of each kind the path names.
			byKind := map[string]params{}
			objA, objB := params{}, params{}
			for _, kind := range kinds {
				byKind[kind] = o.make(t, keyA, kind)
				maps.Copy(objA, byKind[kind])
				maps.Copy(objB, o.make(t, keyB, kind))
			}
			before := map[string]string{}
			for _, kind := range kinds {
				before[kind] = o.read(t, keyA, kind, objA)
			}
			// B on A's objects, and on each of A's among B's own.
			tries := []params{objA}
			if len(kinds) > 1 {
				for _, kind := range kinds {
					mixed := maps.Clone(objB)
					maps.Copy(mixed, byKind[kind])
					tries = append(tries, mixed)
				}
			}
			body := requestBody(o, method, path)
			// B's answer is that of an id that never existed: 404, or the
			// checkout contract's 400 not_found.
			missing := o.do(t, keyA, method+" "+fill(t, path, neverStored(byKind)), body)
			if missing.Status/100 == 2 {
				t.Fatalf("%s on ids never stored = %d %s", op, missing.Status, missing.Body)
			}
			wantMissing := "404"
			if contractPath(path) {
				wantMissing = "400 not_found"
			}
			if adminOnly {
				wantMissing = "403 forbidden"
			}
			if got := fmt.Sprintf("%d %s", missing.Status, errorCode(missing.Body)); !strings.HasPrefix(got, wantMissing) {
				t.Errorf("%s on ids never stored = %s %s, want %s", op, got, missing.Body, wantMissing)
			}
			for _, ps := range tries {
				res := o.do(t, keyB, method+" "+fill(t, path, ps), body)
				if res.Status != missing.Status || errorCode(res.Body) != errorCode(missing.Body) {
					t.Errorf("B's %s on A's objects %v = %d %s, want %d %s as for ids never stored",
						op, ps, res.Status, res.Body, missing.Status, errorCode(missing.Body))
				}
			}
			for _, kind := range kinds {
				if after := o.read(t, keyA, kind, objA); after != before[kind] {
					t.Errorf("B's %s changed A's object:\nbefore %s\nafter  %s", op, before[kind], after)
				}
			}
			// A's own call; then an admin's, on objects of A's alike.
			owner := o.do(t, keyA, method+" "+fill(t, path, objA), body)
			want := ownerAnswers[op]
			got := fmt.Sprintf("%d %s", owner.Status, errorCode(owner.Body))
			switch {
			case adminOnly && owner.Status != http.StatusForbidden:
				t.Errorf("A's %s (an admin route) = %d %s, want 403", op, owner.Status, owner.Body)
			case !adminOnly && want == "" && owner.Status/100 != 2:
				t.Errorf("A's %s on its own objects = %d %s, want 2xx", op, owner.Status, owner.Body)
			case !adminOnly && want != "" && got != want:
				t.Errorf("A's %s on its own objects = %s %s, want %s", op, got, owner.Body, want)
			}
			fresh := params{}
			for _, kind := range kinds {
				maps.Copy(fresh, o.make(t, keyA, kind))
			}
			adm := o.do(t, keyAdmin, method+" "+fill(t, path, fresh), body)
			if !adminOnly {
				// A create answers 201 or 200 (stored already) alike.
				same := adm.Status == owner.Status || adm.Status/100 == 2 && owner.Status/100 == 2
				if got, want := fmt.Sprintf("%d", adm.Status), fmt.Sprintf("%d", owner.Status); !same {
					t.Errorf("admin's %s on A's objects = %s %s, want %s as A's", op, got, adm.Body, want)
				}
			} else if w := ownerAnswers[op]; w != "" && fmt.Sprintf("%d %s", adm.Status, errorCode(adm.Body)) != w || w == "" && adm.Status/100 != 2 {
				t.Errorf("admin's %s on A's objects = %d %s, want %q", op, adm.Status, adm.Body, w)
			}
		})
	}
	if walked < 30 {
		t.Errorf("walked %d operations naming an object, want every flow's", walked)
	}
}

// neverStored returns the parameters of objects, by kind, each kind's own
// id changed in its last character (its parents' kept): the ids of
// objects never stored (the fixtures' ids end in a letter or a hex digit,
// changed to a digit they never end in).
func neverStored(objects map[string]params) params {
	out := params{}
	for _, ps := range objects {
		maps.Copy(out, ps)
	}
	for kind, ps := range objects {
		for name, v := range ps {
			if own := ownParam(kind); own != "" && name != own {
				continue // a parent's, kept
			}
			last := byte('0')
			if v[len(v)-1] == '0' {
				last = '1'
			}
			out[name] = v[:len(v)-1] + string(last)
		}
	}
	return out
}

// ownParam returns the path parameter naming a kind's own object: the
// last of its key ("" for a kind no path names).
func ownParam(kind string) string {
	all := docParam.FindAllString(kind, -1)
	if len(all) == 0 {
		return ""
	}
	return strings.Trim(all[len(all)-1], "{}")
}

// contractPath reports whether a path is of the checkout contract, whose
// unknown ids answer 400 not_found.
func contractPath(path string) bool {
	for _, p := range []string{"/stock/", "/payment/", "/orders/"} {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

// requestBody returns a valid body for an operation on an object, or ""
// for one that takes none.
func requestBody(o *ownership, method, path string) string {
	op := o.doc["paths"].(map[string]any)[path].(map[string]any)[strings.ToLower(method)].(map[string]any)
	if _, ok := op["requestBody"]; !ok {
		return ""
	}
	if b, ok := operationBodies[method+" "+path]; ok {
		return b
	}
	for _, k := range ownedKinds {
		if k.create == method+" "+path && k.body != nil {
			return k.body(o.n.Add(1), params{})
		}
	}
	o.t.Errorf("%s %s takes a body: add one to operationBodies", method, path)
	return "{}"
}

// operationBodies are the bodies of operations on an object that create
// none.
var operationBodies = map[string]string{
	"PATCH /v1/watchers/{id}":              `{"name":"renamed"}`,
	"PUT /v1/subscribers/{id}/preferences": `{"time_zone":"UTC","preferences":{"exclude":["avail:x|*"]}}`,
}

// TestOwnership_listsShowOnlyTheCallersTenant creates one object of every
// kind as tenant A, then walks every list operation of /openapi.json (a
// GET naming no object): A's lists show A's objects, an admin's too, and
// B's none of them.
func TestOwnership_listsShowOnlyTheCallersTenant(t *testing.T) {
	o := newOwnership(t)
	var ids []string
	queries := maps.Clone(listQueries)
	for kind, k := range ownedKinds {
		// Objects under another are listed under it (the matrix covers
		// those lists); the checkout contract has no lists.
		_, createPath, _ := strings.Cut(k.create, " ")
		if slices.Contains(unlistedKinds, kind) || strings.Contains(k.create, "{") || k.store != nil || marketLists[createPath] != "" {
			continue
		}
		ps := o.make(t, keyA, kind)
		if kind == "/v1/subscribers/{id}" {
			// A's subscriber, with a notification of its own.
			notified := ownedKinds["/v1/notifications/{id}"].store(t, o, ps)
			queries["/v1/notifications"] = "subscriber=" + ps["id"] + "&limit=1000"
			ids = append(ids, notified["id"])
		}
		for _, v := range ps {
			ids = append(ids, v)
		}
	}
	seenByA := map[string]bool{}
	for _, op := range o.operations() {
		method, path, _ := strings.Cut(op, " ")
		if method != http.MethodGet || strings.Contains(path, "{") || strings.HasPrefix(path, "/v1/console/") || path == "/metrics" ||
			marketLists[path] != "" {
			continue
		}
		url := path + "?limit=1000"
		if q, ok := queries[path]; ok {
			url = path + "?" + q
		}
		t.Run(op, func(t *testing.T) {
			a, b, adm := o.do(t, keyA, "GET "+url, ""), o.do(t, keyB, "GET "+url, ""), o.do(t, keyAdmin, "GET "+url, "")
			if a.Status != http.StatusOK && a.Status != http.StatusServiceUnavailable && !strings.HasPrefix(path, "/v1/admin/") {
				t.Errorf("A's %s = %d %s", url, a.Status, a.Body)
			}
			for _, id := range ids {
				inA := strings.Contains(string(a.Body), `"`+id+`"`)
				seenByA[id] = seenByA[id] || inA
				if inA && b.Status == http.StatusOK && strings.Contains(string(b.Body), id) {
					t.Errorf("B's %s shows A's %s: %s", url, id, b.Body)
				}
				if inA && !strings.Contains(string(adm.Body), id) {
					t.Errorf("admin's %s misses A's %s: %s", url, id, adm.Body)
				}
			}
		})
	}
	for _, id := range ids {
		if !seenByA[id] {
			t.Errorf("no list of A's shows its %s", id)
		}
	}
}

// marketLists are lists every tenant shares, and why: they are left out
// of the list walk.
var marketLists = map[string]string{
	"/v1/offers": "the market of sell offers, which every tenant's searches run over",
}

// listQueries are the queries of list operations that need more than a
// limit.
var listQueries = map[string]string{
	"/v1/subscriptions": "email=reader@example.org&limit=1000",
}
