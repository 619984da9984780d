package main

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/notifier/history"
)

// statusCode returns "<status> <error code>" of an answer.
func statusCode(status int, body []byte) string {
	return strings.TrimSpace(fmt.Sprintf("%d %s", status, errorCode(body)))
}

// TestStandingSearch_namesOnlyASubscriberTheCallerSees creates standing
// searches naming subscribers: another tenant's subscriber answers as one
// that never existed (404 subscriber_not_found), and nothing is stored;
// the caller's own, or any for an admin key, is taken.
func TestStandingSearch_namesOnlyASubscriberTheCallerSees(t *testing.T) {
	o := newOwnership(t)
	subA := o.make(t, keyA, "/v1/subscribers/{id}")["id"]
	subB := o.make(t, keyB, "/v1/subscribers/{id}")["id"]
	never := neverStored(map[string]params{"s": {"id": subA}})["id"]
	body := func(sub string) string {
		return ownedKinds["/v1/standing-searches/{id}"].body(o.n.Add(1), params{"id": sub})
	}
	for _, tc := range []struct {
		name, key, subscriber, want string
	}{
		{"another tenant's subscriber", keyB, subA, "404 subscriber_not_found"},
		{"a subscriber never stored", keyB, never, "404 subscriber_not_found"},
		{"its own subscriber", keyB, subB, "201"},
		{"an admin naming a tenant's", keyAdmin, subA, "201"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := o.do(t, tc.key, "GET /v1/standing-searches?limit=1000", "")
			res := o.do(t, tc.key, "POST /v1/standing-searches", body(tc.subscriber))
			if got := statusCode(res.Status, res.Body); got != tc.want {
				t.Fatalf("create naming %s as %s = %s %s, want %s", tc.subscriber, tc.key, got, res.Body, tc.want)
			}
			after := o.do(t, tc.key, "GET /v1/standing-searches?limit=1000", "")
			if stored := string(after.Body) != string(before.Body); stored != (res.Status == http.StatusCreated) {
				t.Errorf("the caller's standing searches changed: %v, want %v:\nbefore %s\nafter  %s", stored, !stored, before.Body, after.Body)
			}
		})
	}
}

// TestSubscriber_addressIsUniquePerTenant subscribes one address as two
// tenants: a second subscriber of it in one tenant is 409, while the
// other tenant subscribes it as its own and learns nothing of the first.
func TestSubscriber_addressIsUniquePerTenant(t *testing.T) {
	o := newOwnership(t)
	body := func(name string) string {
		return fmt.Sprintf(`{"name":%q,"destinations":[{"kind":"webhook","address":"https://hooks.example.org/shared"}]}`, name)
	}
	var idA string
	for _, tc := range []struct {
		name, key, want string
	}{
		{"the first tenant", keyA, "201"},
		{"the first tenant again", keyA, "409 already_subscribed"},
		{"another tenant", keyB, "201"},
		{"that tenant again", keyB, "409 already_subscribed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := o.do(t, tc.key, "POST /v1/subscribers", body(tc.name))
			if got := statusCode(res.Status, res.Body); got != tc.want {
				t.Fatalf("subscribe as %s = %s %s, want %s", tc.key, got, res.Body, tc.want)
			}
			var created struct{ ID string }
			if res.Status == http.StatusCreated {
				res.JSON(t, &created)
				if idA == "" {
					idA = created.ID
				} else if created.ID == idA {
					t.Errorf("%s got A's subscriber %s", tc.key, idA)
				}
			}
			if idA != "" && tc.key == keyB && strings.Contains(string(res.Body), idA) {
				t.Errorf("B's answer names A's subscriber: %s", res.Body)
			}
		})
	}
}

// TestFeedSubscribable_eachTenantItsOwnOnASharedFeed has two tenants add
// one feed URL: each defines, lists, reads, subscribes to and deletes its
// own subscribables under names of its own, the same name included, and
// an admin key sees both.
func TestFeedSubscribable_eachTenantItsOwnOnASharedFeed(t *testing.T) {
	o := newOwnership(t)
	feedBody := `{"url":"https://feeds.example.org/tenancy/shared.xml"}`
	var feedID string
	for _, key := range []string{keyA, keyB} {
		res := o.do(t, key, "POST /v1/feeds", feedBody)
		if res.Status/100 != 2 {
			t.Fatalf("add the feed as %s: %d %s", key, res.Status, res.Body)
		}
		var fd struct{ ID string }
		res.JSON(t, &fd)
		feedID = fd.ID
	}
	base := "/v1/feeds/" + feedID + "/subscribables"
	step := func(t *testing.T, key, op, body, want string) []byte {
		t.Helper()
		res := o.do(t, key, op, body)
		if got := statusCode(res.Status, res.Body); got != want {
			t.Fatalf("%s as %s = %s %s, want %s", op, key, got, res.Body, want)
		}
		return res.Body
	}
	names := func(t *testing.T, key string) []string {
		t.Helper()
		var raw struct {
			Items []struct {
				Name    string `json:"name"`
				Manager struct {
					Kind string `json:"kind"`
				} `json:"manager"`
			} `json:"items"`
		}
		res := o.do(t, key, "GET "+base+"?limit=1000", "")
		res.JSON(t, &raw)
		var out []string
		for _, it := range raw.Items {
			out = append(out, it.Name+":"+it.Manager.Kind)
		}
		slices.Sort(out)
		return out
	}
	for _, tc := range []struct {
		name, key, op, body, want string
	}{
		{"A defines daily", keyA, "POST " + base, `{"name":"daily","manager":{"kind":"daily","hour":7}}`, "201"},
		{"B does not see it", keyB, "GET " + base + "/daily", "", "404 subscribable_not_found"},
		{"B cannot delete it", keyB, "DELETE " + base + "/daily", "", "404 subscribable_not_found"},
		{"B cannot subscribe to it", keyB, "POST " + base + "/daily/subscriptions", `{"destination":{"kind":"log","name":"b"}}`, "404 subscribable_not_found"},
		{"B defines its own daily, another manager", keyB, "POST " + base, `{"name":"daily","manager":{"kind":"each"}}`, "201"},
		{"A subscribes an address", keyA, "POST " + base + "/daily/subscriptions", `{"destination":{"kind":"log","name":"reader"}}`, "201"},
		{"B subscribes the same one to its own", keyB, "POST " + base + "/daily/subscriptions", `{"destination":{"kind":"log","name":"reader"}}`, "201"},
		{"A cannot let go of a feed its subscribables hold", keyA, "DELETE /v1/feeds/" + feedID, "", "409 feed_conflict"},
	} {
		t.Run(tc.name, func(t *testing.T) { step(t, tc.key, tc.op, tc.body, tc.want) })
	}
	for _, tc := range []struct {
		key  string
		want []string
	}{
		{keyA, []string{"daily:daily"}},
		{keyB, []string{"daily:each"}},
		{keyAdmin, []string{"daily:daily", "daily:each"}},
	} {
		if got := names(t, tc.key); !slices.Equal(got, tc.want) {
			t.Errorf("%s's subscribables of the shared feed = %v, want %v", tc.key, got, tc.want)
		}
	}
	// Each tenant's subscriptions list is its own, and B's subscription
	// is B's to delete, not A's.
	var subsA, subsB struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	o.do(t, keyA, "GET "+base+"/daily/subscriptions", "").JSON(t, &subsA)
	o.do(t, keyB, "GET "+base+"/daily/subscriptions", "").JSON(t, &subsB)
	if len(subsA.Items) != 1 || len(subsB.Items) != 1 || subsA.Items[0].ID == subsB.Items[0].ID {
		t.Fatalf("subscriptions: A's %+v, B's %+v, want one each", subsA, subsB)
	}
	step(t, keyA, "DELETE /v1/feed-subscriptions/"+subsB.Items[0].ID, "", "404 subscription_not_found")
	step(t, keyB, "DELETE "+base+"/daily", "", "204")
	if got := names(t, keyA); !slices.Equal(got, []string{"daily:daily"}) {
		t.Errorf("A's subscribables after B deleted its own = %v", got)
	}
	step(t, keyA, "GET "+base+"/daily/subscriptions", "", "200")
}

// TestConsoleEvents_notificationsOfTheCallersTenant records a notification
// to a subscriber of each tenant: the console's notifier events show each
// tenant its own, and an admin key both.
func TestConsoleEvents_notificationsOfTheCallersTenant(t *testing.T) {
	o := newOwnership(t)
	ids := map[string]string{}
	for _, key := range []string{keyA, keyB} {
		sub := o.make(t, key, "/v1/subscribers/{id}")["id"]
		ids[key] = fmt.Sprintf("console-n-%d", o.n.Add(1))
		rec := history.Record{ID: ids[key], Flow: "test", Event: "test.sent", SubscriberID: sub, Channel: "webhook",
			Subject: "s", Status: "sent", Attempts: 1, At: time.Now().UTC()}
		if err := o.notifier().History().Record(t.Context(), rec); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		key         string
		sees, hides []string
	}{
		{keyA, []string{ids[keyA]}, []string{ids[keyB]}},
		{keyB, []string{ids[keyB]}, []string{ids[keyA]}},
		{keyAdmin, []string{ids[keyA], ids[keyB]}, nil},
	} {
		t.Run(tc.key, func(t *testing.T) {
			res := o.do(t, tc.key, "GET /v1/console/events?flow=notifier&limit=200", "")
			if res.Status != http.StatusOK {
				t.Fatalf("events as %s: %d %s", tc.key, res.Status, res.Body)
			}
			for _, id := range tc.sees {
				if !strings.Contains(string(res.Body), `"`+id+`"`) {
					t.Errorf("%s's events miss %s: %s", tc.key, id, res.Body)
				}
			}
			for _, id := range tc.hides {
				if strings.Contains(string(res.Body), `"`+id+`"`) {
					t.Errorf("%s's events show another tenant's %s: %s", tc.key, id, res.Body)
				}
			}
		})
	}
}
